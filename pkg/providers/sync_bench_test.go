package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// BenchmarkSyncOfAThousandRegistrations is one sync of a hub with 1,000
// registration Secrets, all engaged already, after one of them changed:
// what every replica spends on a registration, a rotation or a relabelling
// anywhere in the fleet. The kubeconfigs carry a CA, a client certificate
// and its key, as Cluster API writes them.
//
//	go test -run XXX -bench SyncOfAThousand -benchmem ./pkg/providers
func BenchmarkSyncOfAThousandRegistrations(b *testing.B) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Secret{}, 0, cache.Indexers{})
	ca, key := testCertificate(b)
	for i := range 1000 {
		sec := plainSecret(kubeconfig("certificate-authority-data: "+ca, "client-certificate-data: "+ca+"\n    client-key-data: "+key))
		sec.Name, sec.Namespace, sec.UID, sec.ResourceVersion = fmt.Sprintf("c%04d", i), "clusters", types.UID(fmt.Sprint(i)), "1"
		sec.Labels = map[string]string{"fleetmirror.io/cluster-name": fmt.Sprintf("c%04d", i)}
		if err := inf.GetStore().Add(sec); err != nil {
			b.Fatal(err)
		}
	}
	s := &secretsSync{p: &KubeconfigSecrets{Recorder: record.NewFakeRecorder(2000)}, e: nopEngager{},
		engaged: engagedSet{}, refused: map[string]string{}}
	ctx := context.Background()
	s.sync(ctx, []cache.SharedIndexInformer{inf}) // every cluster engaged
	if len(s.engaged) != 1000 {
		b.Fatalf("%d clusters engaged, want 1000", len(s.engaged))
	}
	obj, _, _ := inf.GetStore().GetByKey("clusters/c0000")
	changed := obj.(*corev1.Secret).DeepCopy()
	b.ReportAllocs()
	rv := 1
	for b.Loop() {
		rv++
		changed.ResourceVersion = fmt.Sprint(rv) // relabelled, say
		_ = inf.GetStore().Update(changed.DeepCopy())
		s.sync(ctx, []cache.SharedIndexInformer{inf})
	}
}

type nopEngager struct{}

func (nopEngager) Engage(context.Context, fleet.Spec) error { return nil }
func (nopEngager) Relabel(string, map[string]string)        {}
func (nopEngager) Listed()                                  {}

// testCertificate returns a self-signed certificate and its key, PEM and
// then base64, as a kubeconfig holds them.
func testCertificate(b *testing.B) (cert, key string) {
	b.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		b.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		b.Fatal(err)
	}
	enc := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return enc("CERTIFICATE", der), enc("EC PRIVATE KEY", kd)
}
