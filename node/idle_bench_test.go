package node

import (
	"testing"
	"time"

	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/persist/natstest"
)

// BenchmarkIdleNode is what a node owning every partition (64, as `serve --cluster` does by
// default) costs with no requests at all: lease renewals, heartbeats, watches, the engines'
// timers, on three in-process NATS servers, the servers' CPU included: cpu-ms/s over b.N
// windows of one second.
//
//	go test -run XXX -bench IdleNode -benchtime 5x ./node
func BenchmarkIdleNode(b *testing.B) {
	c := natstest.StartCluster(b, 3)
	_, simURL := startSim(b)
	cfg := clusterConfig(b, "a:1", c.URLs(), simURL)
	cfg.Partitions = DefaultPartitions
	a := start(b, cfg)
	eventually(b, 60*time.Second, "a runs every partition", func() bool { return len(owned(a)) == DefaultPartitions })
	time.Sleep(3 * time.Second) // the takeover's writes settle
	cpu0 := cputime.Process()
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/s")
}
