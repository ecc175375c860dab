package main

import (
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestNoSchemeOfAllTypes checks that the hub links none of the packages that
// register every built-in API type (fleettest.LeanDeps): with client-go's
// typed clients and Cluster API's util/secret its binary was 33.0 MB, 21.2
// MB without. Besides the member's groups it reads core/v1 (the kubeconfig
// Secrets, Events).
func TestNoSchemeOfAllTypes(t *testing.T) {
	fleettest.LeanDeps(t, "hub", "k8s.io/api/apidiscovery/v2", "k8s.io/api/coordination/v1", "k8s.io/api/core/v1")
}
