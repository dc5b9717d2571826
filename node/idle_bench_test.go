package node

import (
	"syscall"
	"testing"
	"time"

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
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime)
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/s")
}
