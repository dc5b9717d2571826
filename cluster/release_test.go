package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/cluster/clustertest"
)

// previousReleaseOpen is what a node of the release before takeover at the TTL (fc3427e:
// node.go Start and bucket) does to the cluster's buckets before it starts, copied but for
// the node struct: leaseTTL 0 is "started without --lease-ttl".
func previousReleaseOpen(ctx context.Context, js jetstream.JetStream, prefix string, partitions int, leaseTTL time.Duration) error {
	if leaseTTL == 0 {
		leaseTTL = DefaultLeaseTTL
		if kv, err := js.KeyValue(ctx, prefix+"_leases"); err == nil {
			if st, err := kv.Status(ctx); err == nil && st.TTL() > 0 {
				leaseTTL = st.TTL() // the cluster's
			}
		}
	}
	md := map[string]string{"gateway_partitions": strconv.Itoa(partitions), "gateway_lease_ttl": leaseTTL.String()}
	for _, name := range []string{prefix + "_leases", prefix + "_nodes"} {
		kv, err := js.KeyValue(ctx, name)
		cfg := jetstream.KeyValueConfig{
			Bucket: name, History: 1, TTL: leaseTTL,
			Storage: jetstream.FileStorage, Replicas: 1, Metadata: md, LimitMarkerTTL: markerTTL,
		}
		if err != nil {
			return err
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		if st.LimitMarkerTTL() == 0 && st.TTL() == leaseTTL {
			cfg.Replicas = st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas
			if _, err := js.UpdateKeyValue(ctx, cfg); err != nil {
				return fmt.Errorf("update: %w", err)
			}
		}
		if got := st.Metadata()["gateway_partitions"]; got != md["gateway_partitions"] {
			return fmt.Errorf("%w: partitions", ErrPartitionsDiffer)
		}
		if st.TTL() != leaseTTL {
			return fmt.Errorf("cluster: %w: the cluster's is %v, this node was given %v", ErrLeaseTTLDiffers, st.TTL(), leaseTTL)
		}
	}
	return nil
}

type bucketShape struct {
	maxAge, markers time.Duration
	md              map[string]string
}

func shapeOf(t *testing.T, js jetstream.JetStream, name string) bucketShape {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return bucketShape{st.TTL(), st.LimitMarkerTTL(), st.Metadata()}
}

// A node of the release before, started on a cluster this release made (without --lease-ttl,
// with the cluster's TTL, with twice it), refuses to start and leaves the buckets as they were:
// the nodes of this release still start, with --lease-ttl or without, and still take over.
func TestPreviousReleaseNodeLeavesTheBucketsAlone(t *testing.T) {
	c := clustertest.StartCluster(t, 1)
	tc := newTestCluster(t, c)
	a := tc.start("a:1")
	eventually(t, settleWithin, "a owns all", tc.settled(a))
	if !a.takeOver {
		t.Fatal("a leases bucket this release made is not taken over by revision")
	}
	js, err := jetstream.New(conn(t, c))
	if err != nil {
		t.Fatal(err)
	}
	leases, nodes := shapeOf(t, js, tc.prefix+"_leases"), shapeOf(t, js, tc.prefix+"_nodes")
	for _, ttl := range []time.Duration{0, testLeaseTTL, leasesMaxAge * testLeaseTTL} {
		err := previousReleaseOpen(context.Background(), js, tc.prefix, DefaultPartitions, ttl)
		if !errors.Is(err, ErrLeaseTTLDiffers) {
			t.Fatalf("a node of the release before, --lease-ttl %v: %v, want it refused for the TTL", ttl, err)
		}
		for name, was := range map[string]bucketShape{"_leases": leases, "_nodes": nodes} {
			if now := shapeOf(t, js, tc.prefix+name); now.maxAge != was.maxAge || now.markers != was.markers || !maps.Equal(now.md, was.md) {
				t.Fatalf("bucket %s after a start of a node of the release before (--lease-ttl %v): %+v, was %+v", name, ttl, now, was)
			}
		}
	}
	b, err := tc.tryStart("b:1")
	if err != nil {
		t.Fatalf("this release, --lease-ttl %v: %v", testLeaseTTL, err)
	}
	d, err := tc.tryStart("c:1", func(c *Config) { c.LeaseTTL = 0 })
	if err != nil {
		t.Fatalf("this release, no --lease-ttl: %v", err)
	}
	if !b.takeOver || !d.takeOver || d.cfg.LeaseTTL != testLeaseTTL {
		t.Fatalf("nodes started after: takeOver %v, %v; TTL without --lease-ttl %v, want %v", b.takeOver, d.takeOver, d.cfg.LeaseTTL, testLeaseTTL)
	}
}

// A cluster whose buckets a release before the lapse markers made (MaxAge = TTL, no markers):
// the first node of this release turns the leases bucket into this release's (MaxAge
// leasesMaxAge TTLs, markers) and takes over by revision itself, as the nodes after it do.
func TestMarkerlessBucketConverted(t *testing.T) {
	c := clustertest.StartCluster(t, 1)
	tc := newTestCluster(t, c)
	js, err := jetstream.New(conn(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	md := map[string]string{"gateway_partitions": strconv.Itoa(DefaultPartitions), "gateway_lease_ttl": testLeaseTTL.String()}
	for _, name := range []string{tc.prefix + "_leases", tc.prefix + "_nodes"} {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, TTL: testLeaseTTL, Storage: jetstream.FileStorage, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	a := tc.start("a:1")
	b := tc.start("b:1")
	st := shapeOf(t, js, tc.prefix+"_leases")
	if !a.takeOver || !b.takeOver || st.maxAge != leasesMaxAge*testLeaseTTL || st.markers == 0 {
		t.Fatalf("a takeOver=%v, b takeOver=%v; leases bucket MaxAge %v, markers %v; want both, %v, markers on", a.takeOver, b.takeOver, st.maxAge, st.markers, leasesMaxAge*testLeaseTTL)
	}
}
