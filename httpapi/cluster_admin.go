package httpapi

import (
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
)

// clusterJSON is GET /api/admin/cluster (DESIGN.md section 13): the nodes and who owns each
// partition, as the answering node sees them. A single node answers cluster false and empty
// lists (the dashboard hides its panel).
type clusterJSON struct {
	Cluster    bool                    `json:"cluster"`
	Node       string                  `json:"node,omitempty"`
	Nodes      []cluster.NodeInfo      `json:"nodes"`
	Partitions []cluster.PartitionInfo `json:"partitions"`
}

func (s *Server) clusterState(ctx *fasthttp.RequestCtx, _ domain.User) error {
	out := clusterJSON{Nodes: []cluster.NodeInfo{}, Partitions: []cluster.PartitionInfo{}}
	if s.cfg.Cluster != nil {
		snap := s.cfg.Cluster.Snapshot()
		out.Cluster, out.Node = true, s.cfg.Cluster.NodeID()
		if snap.Nodes != nil {
			out.Nodes = snap.Nodes
		}
		if snap.Partitions != nil {
			out.Partitions = snap.Partitions
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
