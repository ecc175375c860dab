// Package v1alpha1 holds the API types of fleetmirror.io/v1alpha1:
// MirrorPolicy, which mirrors objects that cannot carry the annotations
// (their owners rewrite their metadata) with the annotations' grammar.
//
// +kubebuilder:object:generate=true
// +groupName=fleetmirror.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is fleetmirror.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "fleetmirror.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds them to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
