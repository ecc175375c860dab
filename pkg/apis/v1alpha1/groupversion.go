// Package v1alpha1 holds the API types of fleetmirror.io/v1alpha1:
// MirrorPolicy, which mirrors objects that cannot carry the annotations
// (their owners rewrite their metadata) with the annotations' grammar.
//
// +kubebuilder:object:generate=true
// +groupName=fleetmirror.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// apimachinery's SchemeBuilder rather than controller-runtime's
// scheme.Builder, which does the same: the agents' binaries must not link
// controller-runtime's scheme package, which brings every built-in API type
// (cmd/member TestNoSchemeOfAllTypes).
var (
	// GroupVersion is fleetmirror.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "fleetmirror.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds them to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MirrorPolicy{}, &MirrorPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
