package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/internal/jsstream"
)

// The records streams (DESIGN.md section 19). With one stream (a lone gateway, or a cluster
// made before --nats-streams), <prefix>_records captures <prefix>.*.*.>. With S > 1, stream k
// (<prefix>_records, then <prefix>_records_1 ...) captures the subjects of the partitions p
// with p mod S = k, <prefix>.*.<p>.>, and stream 0 also the records of no partition
// (<prefix>.*.g.>). A stream's leader serialises its writes (one goroutine per stream in
// nats-server), so spreading the partitions over S streams whose leaders sit on different
// servers spreads the cluster's writes over the servers. An atomic batch covers one stream:
// every commit is within one partition (a View), or within partition 0 (the Store).
//
// Stream 0 carries the layout in its metadata (gateway_streams, gateway_partitions); a store
// opened on an existing layout keeps it, whatever Options.Streams says (logged), since the
// subjects of the records decide where they are.

// recStream is one records stream and what the store runs for it: its groups of commits
// (formed by the store's one dispatcher: commit.go) and its batched reads (read.go).
type recStream struct {
	s        *Store
	idx      int
	name     string
	stream   jetstream.Stream
	replicas int

	gets    chan *getReq
	full    atomic.Bool // a commit found the stream full; cleared when space returns
	lastAck atomic.Uint64
}

// replicated: the stream has more than one replica; a direct get may be answered by a replica
// behind the leader, and the server refuses a second check of a subject while one is proposed.
func (rs *recStream) replicated() bool { return rs.replicas > 1 }

// ackSeen records a sequence this store knows committed (its own writes' acknowledgements).
func (rs *recStream) ackSeen(seq uint64) {
	for {
		cur := rs.lastAck.Load()
		if seq <= cur || rs.lastAck.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func streamName(prefix string, k int) string {
	if k == 0 {
		return prefix + "_records"
	}
	return prefix + "_records_" + strconv.Itoa(k)
}

// streamSubjects are stream k's subjects among n streams of partitions partitions.
func streamSubjects(prefix string, k, n, partitions int) []string {
	if n == 1 {
		return []string{prefix + ".*.*.>"}
	}
	var out []string
	if k == 0 {
		out = append(out, prefix+".*."+globalToken+".>")
	}
	for p := k; p < partitions; p += n {
		out = append(out, prefix+".*."+strconv.Itoa(p)+".>")
	}
	return out
}

// streamOfToken is the stream of a partition token (the global token and anything unknown:
// stream 0).
func (s *Store) streamOfToken(tok string) *recStream {
	if len(s.streams) == 1 {
		return s.streams[0]
	}
	p, err := strconv.Atoi(tok)
	if err != nil || p < 0 {
		return s.streams[0]
	}
	return s.streams[p%len(s.streams)]
}

// streamOfSubject is the stream a record subject (or a filter with a literal partition token)
// belongs to.
func (s *Store) streamOfSubject(subject string) *recStream {
	if len(s.streams) == 1 {
		return s.streams[0]
	}
	return s.streamOfToken(s.partitionOf(subject))
}

// ensureStreams opens the records streams, making those that are missing and updating the
// settings the options name; it then spreads their leaders over the servers.
func (s *Store) ensureStreams(ctx context.Context, o Options) error {
	cctx, cancel := context.WithTimeout(ctx, 4*o.Timeout)
	defer cancel()
	n, partitions := o.Streams, o.Partitions
	first, err := s.js.Stream(cctx, streamName(s.prefix, 0))
	switch {
	case err == nil:
		cfg := first.CachedInfo().Config
		have, _ := strconv.Atoi(cfg.Metadata["gateway_streams"])
		switch {
		case have == 0 || slices.Contains(cfg.Subjects, s.prefix+".*.*.>"):
			have, partitions = 1, 0
		default:
			if p, _ := strconv.Atoi(cfg.Metadata["gateway_partitions"]); p > 0 {
				if o.Partitions > 0 && p != o.Partitions {
					return fmt.Errorf("natskv: the records streams of prefix %q were made for %d partitions, not %d", s.prefix, p, o.Partitions)
				}
				partitions = p
			}
		}
		if have != n {
			s.log.Warn("the records streams keep the layout they were made with", "streams", have, "asked", n)
		}
		n = have
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if n == 1 {
			partitions = 0
		}
	default:
		return fmt.Errorf("natskv: stream %s: %w", streamName(s.prefix, 0), unavailable(err))
	}
	for k := range n {
		rs := &recStream{s: s, idx: k, name: streamName(s.prefix, k), gets: make(chan *getReq, 4096)}
		if err := s.ensureStream(cctx, o, rs, streamSubjects(s.prefix, k, n, partitions), n, partitions); err != nil {
			return err
		}
		s.streams = append(s.streams, rs)
	}
	s.replicas = s.streams[0].replicas
	if n > 1 && s.replicas > 1 {
		s.spreadLeaders(cctx)
	}
	return nil
}

// ensureStream creates records stream rs, or updates the settings the options name.
func (s *Store) ensureStream(ctx context.Context, o Options, rs *recStream, subjects []string, n, partitions int) error {
	cfg := jetstream.StreamConfig{
		Name:        rs.name,
		Description: "gateway records (persist/natskv)",
		Subjects:    subjects,
		Storage:     jetstream.FileStorage,
		// One message per subject: a record is its subject's last message.
		MaxMsgsPerSubject: 1,
		// A full stream refuses new messages; the default (discard old) would drop records.
		Discard:            jetstream.DiscardNew,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		MaxAge:             0,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		AllowMsgTTL:        true,
	}
	if n > 1 && rs.idx == 0 {
		cfg.Metadata = map[string]string{"gateway_streams": strconv.Itoa(n), "gateway_partitions": strconv.Itoa(partitions)}
	}
	if o.MaxBytes > 0 {
		cfg.MaxBytes = o.MaxBytes
	}
	st, err := s.js.Stream(ctx, rs.name)
	switch {
	case err == nil:
		cur := st.CachedInfo().Config
		cfg.Replicas = cur.Replicas
		if o.Replicas > 0 {
			cfg.Replicas = o.Replicas
		}
		if o.MaxBytes == 0 {
			cfg.MaxBytes = cur.MaxBytes
		}
		if cfg.Replicas != cur.Replicas || cfg.MaxBytes != cur.MaxBytes || !cur.AllowAtomicPublish || !cur.AllowMsgTTL || !cur.AllowDirect {
			cur.Replicas, cur.MaxBytes = cfg.Replicas, cfg.MaxBytes
			cur.AllowAtomicPublish, cur.AllowMsgTTL, cur.AllowDirect = true, true, true
			if st, err = s.js.UpdateStream(ctx, cur); err != nil {
				return fmt.Errorf("natskv: update stream %s: %w", rs.name, err)
			}
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if st, err = jsstream.Create(ctx, s.nc, s.js, &cfg, o.Replicas); err != nil {
			var err2 error
			if st, err2 = s.js.Stream(ctx, rs.name); err2 != nil { // made by another node at once?
				return fmt.Errorf("natskv: create stream %s: %w", rs.name, err)
			}
		}
	default:
		return fmt.Errorf("natskv: stream %s: %w", rs.name, unavailable(err))
	}
	rs.stream = st
	rs.replicas = st.CachedInfo().Config.Replicas
	return nil
}

// spreadLeaders asks the streams' leaders to move so no server leads two while another leads
// none: a stream leader is placed at random when the stream is made, and after a server
// restarts the others keep what they took over. A graceful step-down hands the leadership
// over in milliseconds; requests meanwhile find no responders and are tried again (retry.go).
func (s *Store) spreadLeaders(ctx context.Context) {
	leaders := map[string][]*recStream{}
	var servers []string
	for _, rs := range s.streams {
		info, err := rs.stream.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return
		}
		leaders[info.Cluster.Leader] = append(leaders[info.Cluster.Leader], rs)
		servers = append(servers, info.Cluster.Leader)
		for _, r := range info.Cluster.Replicas {
			if r.Current && !r.Offline {
				servers = append(servers, r.Name)
			}
		}
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	var idle []string
	for _, srv := range servers {
		if len(leaders[srv]) == 0 {
			idle = append(idle, srv)
		}
	}
	for srv, led := range leaders {
		for len(led) > 1 && len(idle) > 0 {
			rs, to := led[len(led)-1], idle[0]
			led, idle = led[:len(led)-1], idle[1:]
			req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": to}})
			resp, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+rs.name, req)
			if err != nil || strings.Contains(string(resp.Data), `"error"`) {
				s.log.Debug("spread the records streams' leaders", "stream", rs.name, "from", srv, "to", to, "err", err)
				continue
			}
			s.log.Info("moved a records stream's leader", "stream", rs.name, "from", srv, "to", to)
		}
	}
}
