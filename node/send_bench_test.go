package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/persist/natstest"
)

var errRetry = errors.New("503: retry")

// BenchmarkNodeSend is issue 27's "1 node / lone" in one process: v1 sends from 64 callers
// over HTTP to a lone `--store nats` node ("lone") or to a cluster of one node owning every
// partition (64, as `serve --cluster` does: "cluster"), each on its own in-process NATS server
// (R1; "/r3": three clustered servers, the records on R3 streams, the node's default three of
// them) and `gateway sim` port, 20 users with linked sessions and keys. cpu-µs/msg is the
// process's CPU per accepted send (the gateway's, the sim's, the NATS server's and the
// callers' together: the callers' and the sim's are the same for both variants, so two
// figures differ by what the gateway and its commits on the server cost). Run each variant in
// its own process, alternated (bench/README.md, cluster8); NODESEND_CPUPROFILE=<file> profiles
// the measured window alone (a %s in it: the variant's name, lone-r3 for lone/r3); NODESEND_LEASETTL=<duration> sets the cluster variant's lease TTL
// (its 64 partitions' renewals: every TTL/4). allocs/msg and B/msg are the process's, and
// groups/msg and batches/msg the store's commit groups (natskv Stats), nats-in/msg and
// nats-out/msg the messages the R1 server took in and sent (publishes and requests; acks,
// replies), stored/msg the messages stored in every stream (the records, fences, leases):
//
//	go test -c -o /tmp/node.test ./node
//	/tmp/node.test -test.run '^$' -test.bench 'NodeSend/cluster$' -test.benchtime 20000x
func BenchmarkNodeSend(b *testing.B) {
	for _, setup := range []string{"lone", "cluster", "lone/r3", "cluster/r3"} {
		b.Run(setup, func(b *testing.B) {
			v, r3 := strings.CutSuffix(setup, "/r3")
			url := ""
			var srv *natstest.Server // R1's: its message counts
			if r3 {
				url = natstest.StartCluster(b, 3).URLs()
			} else {
				srv = natstest.Start(b)
				url = srv.URL
			}
			var simCalls atomic.Int64
			simNet, simURL := startSimCounting(b, &simCalls)
			var c Config
			if v == "lone" {
				c = testConfig(b)
				c.Store, c.NATSURL, c.NATSPrefix, c.SimURL = "nats", url, "lb", simURL
				c.LeaseTTL = 0 // the single-writer lease's default, as `serve --store nats` has it
			} else {
				c = clusterConfig(b, "a:1", url, simURL)
				c.Partitions = DefaultPartitions
				if s := os.Getenv("NODESEND_LEASETTL"); s != "" {
					c.LeaseTTL, _ = time.ParseDuration(s)
				}
			}
			c.PlansFile, c.DefaultPlan = filepath.Join(b.TempDir(), "plans.json"), "bench" // no limit in the way
			if err := os.WriteFile(c.PlansFile, []byte(`{"bench": {"rate_limit": 1000000000, "monthly_messages": 1000000000}}`), 0o600); err != nil {
				b.Fatal(err)
			}
			n := start(b, c)
			if v == "cluster" {
				eventually(b, 60*time.Second, "the node runs every partition", func() bool { return len(owned(n)) == DefaultPartitions })
			}
			admin := n.token(b, "root", "admin")
			const users = 20
			keys := make([]string, users)
			for i := range users {
				uid := fmt.Sprintf("bench%02d", i)
				tok := n.signIn(b, uid)
				n.link(b, simNet, tok, fmt.Sprintf("4477009010%02d", i))
				keys[i], _ = n.newKey(b, admin, uid, "bench")
			}
			addr := n.url[len("http://"):]
			hc := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
			body := []byte(`{"phone":"+4915000012345","message":"Hi Ana, your order #1001 has shipped. Track it at https://example.com/t/1001 - thanks for shopping with us!"}`)
			var sendOnce func(k int) error
			var retried atomic.Int64
			send := func(k int) error {
				for {
					err := sendOnce(k)
					if errors.Is(err, errRetry) {
						retried.Add(1) // a 503 under this machine's load: retried, as a client does
						time.Sleep(50 * time.Millisecond)
						continue
					}
					return err
				}
			}
			sendOnce = func(k int) error {
				req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(res)
				req.Header.SetMethod("POST")
				req.SetRequestURI("http://" + addr + "/api/v1/messages/send")
				req.Header.Set("x-api-key", keys[k%users])
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(body)
				if err := hc.DoTimeout(req, res, 30*time.Second); err != nil {
					return err
				}
				if res.StatusCode() == 503 {
					return errRetry
				}
				if res.StatusCode() != 200 {
					return fmt.Errorf("send: %d: %s", res.StatusCode(), res.Body())
				}
				return nil
			}
			for i := range 200 { // warm-up: every user's session and key in use
				if err := send(i); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(2 * time.Second) // the warm-up's deliveries and outcomes settle
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Value
			if path := os.Getenv("NODESEND_CPUPROFILE"); path != "" { // the window alone
				f, err := os.Create(strings.ReplaceAll(path, "%s", strings.ReplaceAll(setup, "/", "-")))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer pprof.StopCPUProfile()
			}
			calls0, gc0, cycles0 := simCalls.Load(), gcCPU(), readMetric("/gc/cycles/total:gc-cycles").Uint64()
			groups0, batches0 := n.st.nats.Stats()
			allocs0, bytes0 := readMetric("/gc/heap/allocs:objects").Uint64(), readMetric("/gc/heap/allocs:bytes").Uint64()
			var in0, out0 int64
			if srv != nil {
				in0, out0 = srv.Counts()
			}
			seqs0 := streamSeqs(b, url)
			cpu0 := cputime.Process()
			b.ResetTimer()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := send(int(i)); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			cpu := cputime.Process() - cpu0
			pprof.StopCPUProfile()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
			b.ReportMetric(float64(retried.Load()), "503s")
			b.ReportMetric(float64(simCalls.Load()-calls0)/float64(b.N), "sim-calls/msg")
			b.ReportMetric((gcCPU()-gc0)*1e6/float64(b.N), "gc-cpu-µs/msg")
			b.ReportMetric(float64(readMetric("/gc/cycles/total:gc-cycles").Uint64()-cycles0)*1000/float64(b.N), "gc-cycles/1000msg")
			b.ReportMetric(float64(readMetric("/gc/heap/live:bytes").Uint64())/(1<<20), "live-MiB")
			b.ReportMetric(float64(readMetric("/gc/heap/allocs:objects").Uint64()-allocs0)/float64(b.N), "allocs/msg") // the process's: gateway, NATS server, sim, callers
			b.ReportMetric(float64(readMetric("/gc/heap/allocs:bytes").Uint64()-bytes0)/float64(b.N), "B/msg")
			groups, batches := n.st.nats.Stats()
			b.ReportMetric(float64(groups-groups0)/float64(b.N), "groups/msg") // commit groups sent (natskv)
			b.ReportMetric(float64(batches-batches0)/float64(b.N), "batches/msg")
			if srv != nil {
				in, out := srv.Counts()
				b.ReportMetric(float64(in-in0)/float64(b.N), "nats-in/msg")    // publishes and requests the server took in
				b.ReportMetric(float64(out-out0)/float64(b.N), "nats-out/msg") // acks, replies and deliveries it sent
			}
			b.ReportMetric(float64(streamSeqs(b, url)-seqs0)/float64(b.N), "stored/msg") // messages stored in every stream (records, fences, leases)
		})
	}
}

// streamSeqs is the sum of every stream's last sequence on the NATS at url: the messages
// stored so far (a stream keeps one per subject, but its sequence counts every one).
func streamSeqs(b *testing.B, url string) uint64 {
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	l := js.ListStreams(context.Background())
	for info := range l.Info() {
		n += info.State.LastSeq
	}
	if err := l.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

// gcCPU is the garbage collector's CPU so far, in seconds (runtime/metrics' estimate).
func gcCPU() float64 { return readMetric("/cpu/classes/gc/total:cpu-seconds").Float64() }

func readMetric(name string) metrics.Value {
	m := []metrics.Sample{{Name: name}}
	metrics.Read(m)
	return m[0].Value
}
