package charts_test

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// With sharding, the hub's ServiceAccount may keep its own Lease and read
// the others' in the release namespace, and nothing more; without it,
// there is no such Role.
func TestShardRole(t *testing.T) {
	for _, r := range render(t, "hub", values()).Kinds("Role") {
		if strings.HasSuffix(r.Name, "-shards") {
			t.Errorf("shard Role %s without sharding", r.Name)
		}
	}
	ms := render(t, "hub", values("sharding.enabled", true, "replicaCount", 3))
	var role rbacv1.Role
	ms.Get(t, "Role", "-shards").Decode(t, &role)
	if role.Namespace != "fleetmirror-system" || len(role.Rules) != 1 {
		t.Fatalf("shard Role %s/%s with rules %v", role.Namespace, role.Name, role.Rules)
	}
	r := role.Rules[0]
	// What pkg/shard does with Leases: create and renew its own, list and
	// watch everyone's, read one afresh, delete those of replicas gone.
	want := []string{"create", "delete", "get", "list", "update", "watch"}
	got := slices.Sorted(slices.Values(r.Verbs))
	if !slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(r.Resources, []string{"leases"}) || !slices.Equal(got, want) {
		t.Errorf("shard Role rule %+v, want %v on coordination.k8s.io leases", r, want)
	}
	var binding rbacv1.RoleBinding
	ms.Get(t, "RoleBinding", "-shards").Decode(t, &binding)
	var sa rbacv1.Subject
	if len(binding.Subjects) == 1 {
		sa = binding.Subjects[0]
	}
	if binding.RoleRef.Name != role.Name || sa.Kind != "ServiceAccount" || sa.Name != ms.Get(t, "ServiceAccount", "").Name {
		t.Errorf("shard RoleBinding %+v binds %+v", binding.RoleRef, binding.Subjects)
	}
}
