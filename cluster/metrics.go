package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cluster's series (DESIGN.md section 13).
type metrics struct {
	handovers *prometheus.CounterVec
	forwards  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cluster_handovers_total",
			Help: "Partitions this node took (acquired), handed back gracefully (released) or lost without a hand-over (lost).",
		}, []string{"kind"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cluster_forwarded_total",
			Help: "Requests this node forwarded to a partition's owner, by result (ok, unavailable: answered 503 node_unavailable).",
		}, []string{"result"}),
	}
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_cluster_partitions_owned", Help: "Partitions this node owns (starting or active).",
	}, func() float64 { return float64(n.ownedCount()) })
	for _, k := range []string{"acquired", "released", "lost"} {
		m.handovers.WithLabelValues(k)
	}
	for _, r := range []string{"ok", "unavailable"} {
		m.forwards.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.handovers, m.forwards, owned} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("cluster: metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) handover(kind string)    { m.handovers.WithLabelValues(kind).Inc() }
func (m *metrics) forwarded(result string) { m.forwards.WithLabelValues(result).Inc() }

// Snapshot is GET /api/admin/cluster's body.
type Snapshot struct {
	Nodes      []NodeInfo      `json:"nodes"`
	Partitions []PartitionInfo `json:"partitions"`
}

// NodeInfo is one node as the cluster sees it. A node that left or died stays listed (alive
// false) until this process restarts.
type NodeInfo struct {
	ID         string `json:"id"`
	Alive      bool   `json:"alive"`
	Partitions int    `json:"partitions"`
	Sessions   int    `json:"sessions"`
}

// PartitionInfo is one partition: its owner ("" while none), since when (null while none) and
// how far its owner is: "starting" (booting its records: its requests are held meanwhile),
// "active" (serving) or "releasing" (handing it over); "" while none.
type PartitionInfo struct {
	ID    int        `json:"id"`
	Owner string     `json:"owner"`
	Since *time.Time `json:"since"`
	State string     `json:"state"`
}

// Snapshot is the cluster as this node sees it now.
func (n *Node) Snapshot() Snapshot {
	now := time.Now()
	counts := map[string]int{}
	parts := make([]PartitionInfo, len(n.parts))
	for i := range n.parts {
		parts[i] = PartitionInfo{ID: i}
		if owner, ok := n.Owner(i); ok {
			parts[i].Owner = owner
			counts[owner]++
			var since time.Time
			if owner == n.cfg.NodeID {
				pt := n.parts[i]
				pt.mu.Lock()
				since, parts[i].State = pt.since.UTC(), stateName(pt.state)
				pt.mu.Unlock()
			} else if s := n.view.lease(i); s != nil {
				since, parts[i].State = s.value.Since, s.value.State
			}
			parts[i].Since = &since
		}
	}
	n.view.mu.Lock()
	var nodes []NodeInfo
	for id, s := range n.view.nodes {
		info := NodeInfo{ID: id, Alive: n.view.nodeAliveLocked(id, now), Partitions: counts[id]}
		if info.Alive {
			info.Sessions = s.value.Sessions
		}
		nodes = append(nodes, info)
	}
	n.view.mu.Unlock()
	if !slices.ContainsFunc(nodes, func(x NodeInfo) bool { return x.ID == n.cfg.NodeID }) {
		nodes = append(nodes, NodeInfo{ID: n.cfg.NodeID})
	}
	for i := range nodes {
		if nodes[i].ID == n.cfg.NodeID { // this node knows itself first-hand
			nodes[i].Alive = !n.leaving.Load() && n.Err() == nil
			if n.cfg.Sessions != nil {
				nodes[i].Sessions = n.cfg.Sessions()
			}
		}
	}
	slices.SortFunc(nodes, func(a, b NodeInfo) int { return strings.Compare(a.ID, b.ID) })
	return Snapshot{Nodes: nodes, Partitions: parts}
}
