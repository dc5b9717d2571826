package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/simhttp"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// BenchmarkPartitionBoot is issue 27's failover with messages queued, in one process: the boot
// of one partition's runtime (the events facet and the engine: newRuntime, as Acquire runs it
// once the lease and the fence are taken) from records a node left behind when its partition
// was cut off mid-flight, as a kill -9 leaves them. A cluster node owning every partition (64,
// on one in-process NATS server; "/r3": three clustered servers, the records on R3) serves a
// user of one partition (a linked session on the sim, a key) who sends PARTBOOT_SETTLED
// messages (default 1,000) that are delivered, then PARTBOOT_PENDING (default 1,000), each with
// an Idempotency-Key as the cluster suite's are, that the sim holds; then the partition's view
// is closed (nothing it still runs writes again) and the node shut down. Each of b.N boots then
// writes the partition's fence and starts a runtime on a new view of it (timed: wall-ms,
// cpu-ms of the whole process, the NATS servers' and the sim's included, allocs and B),
// checks that it recovered every pending message, and is cut off the same way (its view closed
// before it stops), so every boot reads what the first did. Its network is the sim's, whose
// sends never answer (the sends of a boot start and wait; none settles). outbox-ms and
// recount-ms are the engine's own log of its reads. PARTBOOT_CPUPROFILE=<file> profiles the
// boots alone (a %d in it: one file per boot, else the last boot's); PARTBOOT_MEMPROFILE=<file>
// writes the allocations of the boots and their stops (the heap profile's alloc_space, from
// the first boot on: `go tool pprof -sample_index=alloc_space -diff_base <file>.base <file>`).
// PARTBOOT_GAP=<duration> waits that long between the settled messages and the pending ones,
// the first owner's engine checkpointing meanwhile: the settled are then history older than the
// outbox's accepts' floor (persist/outbox_boot.go), as a partition's days of it are.
//
//	go test -c -o /tmp/node.test ./node
//	/tmp/node.test -test.run '^$' -test.bench 'PartitionBoot/r1$' -test.benchtime 10x
func BenchmarkPartitionBoot(b *testing.B) {
	for _, setup := range []string{"r1", "r3"} {
		b.Run(setup, func(b *testing.B) { benchPartitionBoot(b, setup == "r3") })
	}
}

func benchPartitionBoot(b *testing.B, r3 bool) {
	settled, pending := envInt(b, "PARTBOOT_SETTLED", 1000), envInt(b, "PARTBOOT_PENDING", 1000)
	var url string
	if r3 {
		url = natstest.StartCluster(b, 3).URLs()
	} else {
		url = natstest.Start(b).URL
	}
	simNet, simURL := startSim(b)
	c := clusterConfig(b, "a:1", url, simURL)
	c.Partitions = DefaultPartitions
	c.PlansFile, c.DefaultPlan = filepath.Join(b.TempDir(), "plans.json"), "bench" // no limit in the way
	if err := os.WriteFile(c.PlansFile, []byte(`{"bench": {"rate_limit": 1000000000, "monthly_messages": 1000000000}}`), 0o600); err != nil {
		b.Fatal(err)
	}

	// The first owner: the user's records, its settled messages, its pending ones.
	n := start(b, c)
	eventually(b, 60*time.Second, "the node runs every partition", func() bool { return len(owned(n)) == DefaultPartitions })
	const uid = "bootuser"
	p := cluster.PartitionOf(uid, DefaultPartitions)
	admin := n.token(b, "root", "admin")
	tok := n.signIn(b, uid)
	n.link(b, simNet, tok, "447700901001")
	key, _ := n.newKey(b, admin, uid, "bench")
	sendAll(b, n, key, settled, "settled")
	eventually(b, 60*time.Second, "the settled messages' outcomes", func() bool {
		pt := n.cluster.part(p)
		return pt != nil && pt.rt.engine.Stats().OutboxDepth == 0 && simNet.DeliveredCount() >= int64(settled)
	})
	if gap := os.Getenv("PARTBOOT_GAP"); gap != "" {
		d, err := time.ParseDuration(gap)
		if err != nil {
			b.Fatalf("PARTBOOT_GAP: %v", err)
		}
		time.Sleep(d) // the history ages; the engine's checkpoints run
	}
	simNet.SetLatency(time.Hour) // every send from here on waits
	sendAll(b, n, key, pending, "pending")
	// Cut off: nothing of the partition's runtime writes once its view is closed (a kill -9's
	// records), then the node goes.
	n.cluster.part(p).view.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	n.Shutdown(ctx)
	cancel()

	// The next owners: a runtime on the partition's records, b.N times.
	log := slog.New(slog.DiscardHandler)
	cfg := c
	cfg.ShutdownTimeout = time.Second
	st, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: c.NATSPrefix, NodeID: "b:1",
		Partitions: c.Partitions, Uncached: persist.WriteOnceTables(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	stores, err := storeConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	plans, err := engine.LoadPlans(cfg.PlansFile)
	if err != nil {
		b.Fatal(err)
	}
	sh := shared{c: cfg, plans: plans, stores: stores, reg: prometheus.NewRegistry(), cloud: openCloud(cfg, log)}
	simc, err := simhttp.Dial(simhttp.Options{URL: simURL, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = simc.Close() })

	var (
		wall, cpu, readsOutbox, readsRecount time.Duration
		allocs, allocBytes                   uint64
	)
	profile := os.Getenv("PARTBOOT_CPUPROFILE")
	memProfile := os.Getenv("PARTBOOT_MEMPROFILE")
	if memProfile != "" {
		writeHeapProfile(b, memProfile+".base")
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		expect, err := st.ReadFenceLeader(context.Background(), p)
		if err != nil {
			b.Fatal(err)
		}
		token, err := st.WriteFence(context.Background(), p, expect, []byte("bench"))
		if err != nil {
			b.Fatal(err)
		}
		view := st.Partition(p, benchFence(token))
		held := &holdNetwork{Network: simc, release: make(chan struct{})}
		booted := &bootLog{}
		o := runtimeOptions{kv: view, log: slog.New(booted), net: held, cloud: sh.cloud, askTimeout: natsAskTimeout}
		if profile != "" {
			f, err := os.Create(strings.ReplaceAll(profile, "%d", strconv.Itoa(i)))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer f.Close()
		}
		b.StartTimer()
		a0, by0 := readMetric("/gc/heap/allocs:objects").Uint64(), readMetric("/gc/heap/allocs:bytes").Uint64()
		cpu0, began := cputime.Process(), time.Now()
		rt, err := newRuntime(context.Background(), sh, o)
		wall += time.Since(began)
		cpu += cputime.Process() - cpu0
		allocs += readMetric("/gc/heap/allocs:objects").Uint64() - a0
		allocBytes += readMetric("/gc/heap/allocs:bytes").Uint64() - by0
		b.StopTimer()
		if profile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			b.Fatal(err)
		}
		got := booted.attrs()
		if got["outbox_pending"] != int64(pending) {
			b.Fatalf("boot %d: %d messages pending, want %d (%v)", i, got["outbox_pending"], pending, got)
		}
		readsOutbox += time.Duration(got["outbox_ms"]) * time.Millisecond
		readsRecount += time.Duration(got["recount_ms"]) * time.Millisecond
		// Cut off as the first owner was: its sends and stop write nothing.
		view.Close()
		close(held.release)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rt.stop(ctx)
		cancel()
		b.StartTimer()
	}
	b.StopTimer()
	if memProfile != "" {
		writeHeapProfile(b, memProfile)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(per(wall), "wall-ms/boot")
	b.ReportMetric(per(cpu), "cpu-ms/boot")
	b.ReportMetric(per(readsOutbox), "outbox-ms")
	b.ReportMetric(per(readsRecount), "recount-ms")
	b.ReportMetric(float64(allocs)/float64(b.N), "allocs/boot")
	b.ReportMetric(float64(allocBytes)/float64(b.N), "B/boot")
}

// envInt is the named environment variable's number, or def.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return v
}

// sendAll sends count messages from the key's user, 64 at a time, each with an
// Idempotency-Key (as the cluster suite's are).
func sendAll(b *testing.B, n *served, key string, count int, tag string) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(count) {
					return
				}
				body := fmt.Sprintf(`{"phone":"15550100001","message":"%s %05d: your order has shipped"}`, tag, i)
				if err := postIdem(n.url, key, fmt.Sprintf("idem-%s-%05d", tag, i), body); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// postIdem sends one v1 send; 503s (a busy store) are sent again.
func postIdem(url, key, idem, body string) error {
	for {
		req, err := http.NewRequest("POST", url+"/api/v1/messages/send", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", idem)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case 200:
			return nil
		case 503:
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return fmt.Errorf("send: %d: %s", res.StatusCode, raw)
	}
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// benchFence is an acquisition's token that stands.
type benchFence []uint64

func (f benchFence) Fence() ([]uint64, error) { return f, nil }
func (benchFence) Fenced()                    {}

// holdNetwork is a network whose sends wait until release is closed (then answer an unknown
// outcome), as the sim held the first owner's.
type holdNetwork struct {
	network.Network
	release chan struct{}
}

func (h *holdNetwork) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := h.Network.Open(sessionID, sink, opts...)
	if err != nil {
		return nil, err
	}
	return holdClient{Client: c, release: h.release}, nil
}

// Close closes nothing: the sim's client is the benchmark's, shared by every boot.
func (h *holdNetwork) Close() error { return nil }

type holdClient struct {
	network.Client
	release chan struct{}
}

func (h holdClient) Send(ctx context.Context, _ domain.Message) (network.Receipt, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return network.Receipt{}, network.ErrUnknownOutcome
}

// bootLog is a slog.Handler that keeps the integer attributes of the engine's "engine booted"
// line and drops every other record.
type bootLog struct {
	mu  sync.Mutex
	got map[string]int64
}

func (l *bootLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *bootLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "engine booted" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = map[string]int64{}
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindInt64 {
			l.got[a.Key] = a.Value.Int64()
		}
		return true
	})
	return nil
}

func (l *bootLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *bootLog) WithGroup(string) slog.Handler      { return l }

func (l *bootLog) attrs() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got
}
