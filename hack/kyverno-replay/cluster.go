package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// kube is the replay's access to its API server, with what envtest lacks
// for Kyverno's tests: a namespace controller.
type kube struct {
	c   client.Client
	cs  kubernetes.Interface
	dyn dynamic.Interface
	// namespaced are the namespaced resources that can be listed and
	// deleted: what a namespace's deletion empties.
	namespaced []schema.GroupVersionResource
	// baseNamespaces and baseDefault are what exists before any test: the
	// namespaces, and the objects of namespace default (RESOURCE/NAME).
	baseNamespaces map[string]bool
	baseDefault    map[string]bool
}

var mirrorPolicies = v1alpha1.GroupVersion.WithResource("mirrorpolicies")

func newKube(cfg *rest.Config) (*kube, error) {
	// Listing every kind to empty a namespace reads deprecated ones too
	// (v1 Endpoints); their warnings say nothing about the replay.
	// The replay polls, and empties namespaces kind by kind: client-go's
	// default rate limit (5 per second) would make its waits time out.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	k := &kube{c: c, cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	lists, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			if slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "delete") && !strings.Contains(r.Name, "/") {
				k.namespaced = append(k.namespaced, gv.WithResource(r.Name))
			}
		}
	}
	return k, nil
}

// snapshot records what exists before the first test, which cleanup
// returns to.
func (k *kube) snapshot(ctx context.Context) error {
	var err error
	if k.baseNamespaces, err = k.namespaceNames(ctx); err != nil {
		return err
	}
	k.baseDefault, err = k.objectsIn(ctx, metav1.NamespaceDefault)
	return err
}

func (k *kube) namespaceNames(ctx context.Context) (map[string]bool, error) {
	l, err := k.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, ns := range l.Items {
		out[ns.Name] = true
	}
	return out, nil
}

// objectsIn lists the objects of namespace ns as RESOURCE.GROUP/NAME.
func (k *kube) objectsIn(ctx context.Context, ns string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, gvr := range k.namespaced {
		l, err := k.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", gvr.GroupResource(), ns, err)
		}
		for _, o := range l.Items {
			out[gvr.GroupResource().String()+"/"+o.GetName()] = true
		}
	}
	return out, nil
}

// runNamespaceController does what kube-controller-manager's namespace
// controller does and envtest lacks: a namespace being deleted is emptied
// and then finalized, so that it goes. Without it, a deleted namespace
// stays Terminating and its objects stay in etcd, to reappear when a later
// test creates a namespace of the same name (Kyverno's tests reuse them).
func (k *kube) runNamespaceController(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := k.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if ns := &l.Items[i]; ns.DeletionTimestamp != nil {
				k.finalizeNamespace(ctx, ns)
			}
		}
		return false, nil
	})
}

// finalizeNamespace deletes what ns holds and, once it holds nothing,
// takes the kubernetes finalizer off it.
func (k *kube) finalizeNamespace(ctx context.Context, ns *corev1.Namespace) {
	left := 0
	for _, gvr := range k.namespaced {
		l, err := k.dyn.Resource(gvr).Namespace(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, o := range l.Items {
			left++
			if o.GetDeletionTimestamp() == nil {
				_ = k.dyn.Resource(gvr).Namespace(ns.Name).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	if left == 0 && len(ns.Spec.Finalizers) > 0 {
		ns = ns.DeepCopy()
		ns.Spec.Finalizers = nil
		_, _ = k.cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	}
}

// ref is an object's identity for cleanup and waits.
type ref struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	// uid, when set, names one incarnation: an object of the same name
	// made since (a copy the agent makes again at once) is another one.
	uid types.UID
}

func refOf(obj *unstructured.Unstructured) ref {
	return ref{gvk: obj.GroupVersionKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// incarnation is refOf with the object's UID.
func incarnation(obj *unstructured.Unstructured) ref {
	r := refOf(obj)
	r.uid = obj.GetUID()
	return r
}

func (r ref) String() string {
	if r.namespace == "" {
		return r.gvk.Kind + " " + r.name
	}
	return r.gvk.Kind + " " + r.namespace + "/" + r.name
}

func (r ref) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	u.SetNamespace(r.namespace)
	u.SetName(r.name)
	return u
}

// exists says whether the object r names exists (even while it is being
// deleted).
func (k *kube) exists(ctx context.Context, r ref) (bool, error) {
	u := r.object()
	err := k.c.Get(ctx, client.ObjectKeyFromObject(u), u)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return r.uid == "" || u.GetUID() == r.uid, nil
}

// deleteAndWait deletes the object r names and waits until it is gone.
func (k *kube) deleteAndWait(ctx context.Context, r ref, timeout time.Duration) error {
	var opts []client.DeleteOption
	if r.uid != "" {
		opts = append(opts, client.Preconditions{UID: &r.uid})
	}
	if err := k.c.Delete(ctx, r.object(), opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return k.waitGone(ctx, timeout, r)
}

func (k *kube) waitGone(ctx context.Context, timeout time.Duration, refs ...ref) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, r := range refs {
			if ok, err := k.exists(ctx, r); err != nil || ok {
				left = append(left, r.String())
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("still there after %s: %s", timeout, strings.Join(left, ", "))
	}
	return nil
}

// cleanup returns the cluster to its snapshot after a test: the
// MirrorPolicies go first (the agent deletes their copies), then what the
// test created, newest first, then any namespace and any object of
// namespace default that was not there before. It says what would not go.
func (k *kube) cleanup(ctx context.Context, created []ref) error {
	var errs []error
	pols, err := k.dyn.Resource(mirrorPolicies).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var polRefs []ref
	for _, p := range pols.Items {
		r := refOf(&p)
		polRefs = append(polRefs, r)
		if err := k.c.Delete(ctx, r.object()); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := k.waitGone(ctx, 30*time.Second, polRefs...); err != nil {
		errs = append(errs, err)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := k.c.Delete(ctx, created[i].object()); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	nss, err := k.namespaceNames(ctx)
	if err != nil {
		return err
	}
	var leftovers []ref
	for ns := range nss {
		if !k.baseNamespaces[ns] {
			r := ref{gvk: corev1.SchemeGroupVersion.WithKind("Namespace"), name: ns}
			leftovers = append(leftovers, r)
			if err := k.c.Delete(ctx, r.object()); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := k.waitGone(ctx, 30*time.Second, append(slices.Clone(created), leftovers...)...); err != nil {
		errs = append(errs, err)
	}
	if err := k.resetDefault(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// resetDefault deletes the objects of namespace default that were not
// there before the first test: copies the agent made there, or left as
// plain objects.
func (k *kube) resetDefault(ctx context.Context) error {
	var extra []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		now, err := k.objectsIn(ctx, metav1.NamespaceDefault)
		if err != nil {
			return false, nil
		}
		extra = nil
		for key := range now {
			if k.baseDefault[key] {
				continue
			}
			extra = append(extra, key)
			gr, name, _ := strings.Cut(key, "/")
			for _, gvr := range k.namespaced {
				if gvr.GroupResource().String() == gr {
					_ = k.dyn.Resource(gvr).Namespace(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{})
				}
			}
		}
		return len(extra) == 0, nil
	})
	if err != nil {
		sort.Strings(extra)
		return fmt.Errorf("namespace default still holds %s", strings.Join(extra, ", "))
	}
	return nil
}
