package clusters

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// mirrorsOf returns the mirrors of sources sources in namespaces
// namespaces as the API server returns them: built by desired.Build, with
// the fields the server adds (uid, resourceVersion, creationTimestamp, one
// managedFields entry).
func mirrorsOf(tb testing.TB, sources, namespaces int, yield func(*unstructured.Unstructured)) {
	for s := range sources {
		src := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{
				"name": fmt.Sprintf("source-%d", s), "namespace": "sources",
				"labels":      map[string]any{"app": "payments", "fleetmirror.io/enabled": "true"},
				"annotations": map[string]any{"fleetmirror.io/targets": "team-*"},
			},
			"data": map[string]any{"user": "YWRtaW4=", "password": "c2VjcmV0LXBhc3N3b3JkLTEyMzQ1Njc4OTA=", "host": "ZGIuZXhhbXBsZS5pbnRlcm5hbA=="},
		}}
		for n := range namespaces {
			m, _, err := desired.Build(src, desired.Target{Cluster: "local", Namespace: fmt.Sprintf("team-%04d", n)}, desired.Options{SourceCluster: "local", ManagedBy: "member"}, nil)
			if err != nil {
				tb.Fatal(err)
			}
			m.SetUID(types.UID(fmt.Sprintf("6f1c2b9e-4a3d-4c8b-9e7f-%012d", s*namespaces+n)))
			m.SetResourceVersion(fmt.Sprint(100000 + s*namespaces + n))
			m.SetCreationTimestamp(metav1.Now())
			m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "fleetmirror-member", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:host":{},"f:password":{},"f:user":{}},"f:metadata":{"f:annotations":{}}}`)}})
			yield(m)
		}
	}
}

// BenchmarkMirrorCacheMemory reports what the cache of our mirrors keeps
// per mirror (live heap after a GC, the store and its source index
// included), for 50 sources in 2,000 namespaces: the member's 100,000
// mirror workload, scaled down to 10,000 so that it runs in seconds. The
// objects handed to the store are dropped, as a watch drops what it
// decoded.
func BenchmarkMirrorCacheMemory(b *testing.B) {
	const sources, namespaces = 5, 2000
	var perMirror float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		s := &watchStore{
			indexer:   cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{IndexSource: indexBySource}),
			transform: summarizeMirror,
		}
		mirrorsOf(b, sources, namespaces, func(o *unstructured.Unstructured) {
			if err := s.apply(o, nil); err != nil {
				b.Fatal(err)
			}
		})
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perMirror = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(sources*namespaces)
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(perMirror, "B/mirror")
}
