package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// getSourceMetadata reads a source's metadata from the API server; nil when
// it does not exist.
func (r *Reconciler) getSourceMetadata(ctx context.Context, c *clusters.Cluster, key Key) (*metav1.PartialObjectMetadata, error) {
	res, err := c.MetadataResource(key.GVK, key.Namespace)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := r.callContext(ctx, c)
	defer cancel()
	m, err := res.Get(callCtx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, clusters.CallError(callCtx, err)
	}
	m.SetGroupVersionKind(key.GVK) // so that events refer to the source's kind
	return m, nil
}

// getSource reads a whole source from the API server; nil when it does not exist.
func (r *Reconciler) getSource(ctx context.Context, c *clusters.Cluster, key Key) (*unstructured.Unstructured, error) {
	res, err := c.Resource(key.GVK, key.Namespace)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := r.callContext(ctx, c)
	defer cancel()
	u, err := res.Get(callCtx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, clusters.CallError(callCtx, err)
}
