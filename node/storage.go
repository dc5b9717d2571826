package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/outlog"
)

// Interface guards: the stores the node opens.
var (
	_ persist.Durable = (*persist.Badger)(nil)
	_ persist.Durable = (*natskv.Store)(nil)
)

// storage is the records store a node opened.
type storage struct {
	kv   persist.Durable // Badger in the data dir, or JetStream (--store nats)
	nats *natskv.Store   // kv on JetStream (nil on Badger)
	// nc is a cluster node's NATS connection, which the store and the membership share.
	nc *nats.Conn
	// lost is closed when a lone --store nats node loses its single-writer lease (nil: never).
	lost <-chan struct{}
}

// openStorage opens the records store: Config.KV, Badger in DATA/db, or the records stream on
// NATS JetStream (under the single-writer lease of --nats-prefix, or partitioned with
// --cluster; README: NATS).
func openStorage(ctx context.Context, c Config, log *slog.Logger) (st storage, err error) {
	if c.KV != nil {
		return storage{kv: c.KV}, nil
	}
	if c.Store != "nats" {
		b, err := persist.OpenBadger(filepath.Join(c.Data, "db"), persist.BadgerOptions{
			Fsync: persist.Fsync(c.Fsync), Logger: log, MinFreeDisk: c.MinFreeDisk,
			MemTableSize: c.MemTableSize,
		})
		if err != nil {
			return st, fmt.Errorf("open storage: %w", err)
		}
		return storage{kv: b}, nil
	}
	defer func() {
		if err != nil {
			st.close(log)
		}
	}()
	o := natskv.Options{
		URL: c.NATSURL, Prefix: c.NATSPrefix, Replicas: c.NATSReplicas, MaxBytes: c.NATSMaxBytes,
		Creds: c.NATSCreds, TLSCA: c.NATSTLSCA, NodeID: c.NodeID, LeaseTTL: cmp.Or(c.LeaseTTL, DefaultSingleLeaseTTL),
		Logger: log.With("component", "nats"), Uncached: persist.WriteOnceTables(),
	}
	if c.Cluster {
		// One connection for the store and the membership; no single-writer lease (the
		// partitions' leases and fences take its place); the partitions spread over
		// --nats-streams records streams (0: as many as the NATS servers can lead, at most 3).
		if st.nc, err = natskv.Connect(o); err != nil {
			return st, fmt.Errorf("open storage: %w", err)
		}
		o.Conn, o.LeaseTTL, o.Streams, o.Partitions = st.nc, 0, c.NATSStreams, c.Partitions
	} else if err := refuseBesideCluster(ctx, c, o); err != nil {
		return st, err
	}
	s, err := natskv.Open(ctx, o)
	if err != nil {
		return st, fmt.Errorf("open storage: %w", err)
	}
	st.kv, st.nats, st.lost = s, s, s.Lost()
	if c.Cluster {
		if err := refuseBesideLone(ctx, c, s); err != nil {
			return st, err
		}
	}
	// Media over persist.BlobMin goes to the store's object store (its outbox record holds a
	// reference): a stock nats-server's 1 MiB messages serve the gateway (DESIGN.md section 19).
	return st, nil
}

// natsAskTimeout is the engine's wait for its actors on NATS: the store's hold of a write while a
// stream elects a leader (natskv.DefaultHold), and 5 s more.
const natsAskTimeout = natskv.DefaultHold + 5*time.Second

// close closes the store, then the NATS connection it shared.
func (st *storage) close(log *slog.Logger) {
	if st.kv != nil {
		if err := st.kv.Close(); err != nil {
			log.Warn("close storage", "err", err)
		}
		st.kv, st.nats = nil, nil
	}
	if st.nc != nil {
		st.nc.Close()
		st.nc = nil
	}
}

// refuseBesideCluster refuses a lone --store nats gateway on a prefix where cluster nodes run
// (their records are partitioned; a lone gateway would write beside them unfenced).
func refuseBesideCluster(ctx context.Context, c Config, o natskv.Options) error {
	nc, err := natskv.Connect(o)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ids, err := cluster.Running(cctx, js, c.NATSPrefix)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if len(ids) > 0 {
		return fmt.Errorf("NATS prefix %q is a cluster's (nodes %s run there): start this gateway with --cluster, or give it another --nats-prefix", c.NATSPrefix, strings.Join(ids, ", "))
	}
	return nil
}

// refuseBesideLone refuses a cluster node on a prefix a lone --store nats gateway holds.
func refuseBesideLone(ctx context.Context, c Config, s *natskv.Store) error {
	node, live, err := s.LeaseHolder(ctx)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if live {
		return fmt.Errorf("%w %q: gateway %q runs there without --cluster; stop it first, or give this cluster another --nats-prefix", natskv.ErrLeaseHeld, c.NATSPrefix, node)
	}
	return nil
}

// storeConfig is the store integration's configuration: the store-platform client, the app
// credentials, and the key that seals store credentials at rest (GATEWAY_SECRET_KEY, else a key
// file in the data dir created on first use).
func storeConfig(c Config) (engine.StoreConfig, error) {
	sc := engine.StoreConfig{
		Client:    ecom.NewClient(ecom.ClientOptions{APIBase: c.EcomAPIBase, APIVersion: c.EcomVersion}),
		PublicURL: c.PublicURL, ClientID: c.EcomClientID, ClientSecret: c.EcomClientSecret,
		RequireSignature: c.RequireWebhookSignature,
	}
	var key []byte
	if c.SecretKey != "" {
		var err error
		if key, err = persist.ParseSecretKey(c.SecretKey); err != nil {
			return sc, fmt.Errorf("GATEWAY_SECRET_KEY: %w", err)
		}
	}
	// Without GATEWAY_SECRET_KEY, the key file is read (or created) when a first credential is
	// sealed or opened, so a gateway without stores never creates one.
	sc.Sealer = persist.NewSealer(key, filepath.Join(c.Data, "secret.key"))
	return sc, nil
}

// devIssuerKey is the cluster's dev issuer key: made once by the first node (put-if-absent),
// sealed with GATEWAY_SECRET_KEY, in the records of no partition, so every node verifies the
// tokens any node (or `gateway token --store nats`) mints.
func devIssuerKey(ctx context.Context, s *natskv.Store, sealer engine.Sealer) ([]byte, error) {
	g := s.Global()
	key := []byte("dev_issuer/key")
	read := func() ([]byte, error) {
		sealed, err := g.Get(key)
		if err != nil {
			return nil, err
		}
		plain, err := sealer.Open(string(sealed))
		if err != nil {
			return nil, fmt.Errorf("the dev issuer key in the store does not open with this GATEWAY_SECRET_KEY: %w", err)
		}
		return []byte(plain), nil
	}
	pem, err := read()
	if !errors.Is(err, domain.ErrRecordNotFound) {
		return pem, err
	}
	if pem, err = identity.NewDevKeyPEM(); err != nil {
		return nil, err
	}
	sealed, err := sealer.Seal(string(pem))
	if err != nil {
		return nil, err
	}
	err = g.Commit(ctx, persist.IfAbsentOp(key), persist.Op{Key: key, Value: []byte(sealed)})
	if errors.Is(err, domain.ErrRecordExists) {
		return read() // another node made it first
	}
	return pem, err
}

// ClusterIssuer is the dev issuer of the cluster on c's NATS prefix (`gateway token --store
// nats`): its key from the store, opened with c.SecretKey (made there if no node made it yet).
// It uses NATSURL, NATSPrefix, NATSCreds, NATSTLSCA and SecretKey. It makes no records streams:
// on a prefix where no node ran yet it fails (the first node makes them, and their layout
// follows the NATS servers and the node's flags, which this command does not know).
func ClusterIssuer(ctx context.Context, c Config) (*identity.Issuer, error) {
	key, err := persist.ParseSecretKey(c.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("GATEWAY_SECRET_KEY: %w", err)
	}
	s, err := natskv.Open(ctx, natskv.Options{URL: c.NATSURL, Prefix: c.NATSPrefix, Creds: c.NATSCreds, TLSCA: c.NATSTLSCA, Existing: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	pem, err := devIssuerKey(ctx, s, persist.NewSealer(key, ""))
	if err != nil {
		return nil, err
	}
	_, issuer, err := identity.NewDevFromPEM(pem)
	return issuer, err
}

// openLogOutbox opens the outbox on a log of its own at Data/outbox when --outbox log (nil
// otherwise): the records' store keeps its idempotency records, checkpoint, marks and history
// entries.
func openLogOutbox(c Config, kv persist.KV, log *slog.Logger) (*persist.LogOutbox, error) {
	if c.Outbox != "log" {
		return nil, nil
	}
	lo, err := persist.OpenLogOutbox(filepath.Join(c.Data, "outbox"), kv, persist.LogOutboxOptions{Sync: outlog.Sync(c.Fsync)})
	if err != nil {
		return nil, err
	}
	lo.SetLogger(log.With("component", "outbox"))
	return lo, nil
}

// pickOutbox is --outbox's default ("" in Config): the log, a lone gateway's (README,
// --outbox: it costs less a message), unless the records' store's outbox still holds pending
// messages (a data directory of a release whose default was badger, or of --outbox badger):
// then badger until they are sent, and the log from the first start after. With --store nats,
// badger (the records' store is the cluster's).
func pickOutbox(c Config, badger *persist.Outbox, log *slog.Logger) (string, error) {
	if c.Outbox != "" {
		return c.Outbox, nil
	}
	if c.Store == "nats" {
		return "badger", nil
	}
	p, err := badger.Pending()
	if err != nil {
		return "", fmt.Errorf("the outbox on the records' store: %w", err)
	}
	if len(p) > 0 {
		log.Info("the outbox stays on the records' store while it holds pending messages; it moves to its own log (DATA/outbox) at the first start after they are sent",
			"pending", len(p))
		return "badger", nil
	}
	return "log", nil
}

// otherOutbox refuses to start on one outbox while the other still holds messages pending
// (accepted and not sent): the engine boots from the outbox chosen only, so they would wait
// unsent until the flag is set back. With --outbox log the records' store's outbox is read (its
// Pending, as its boot would); with badger the log at Data/outbox, when there is one. It
// returns the other outbox, which the one chosen reads for a message it does not hold
// (persist.OutboxReader: what it sent before the switch), or nil; a log returned is open (the
// caller closes it).
func otherOutbox(c Config, badger *persist.Outbox, kv persist.KV) (persist.OutboxReader, *persist.LogOutbox, error) {
	if c.Outbox == "log" {
		p, err := badger.Pending()
		if err != nil {
			return nil, nil, fmt.Errorf("the outbox on the records' store: %w", err)
		}
		if len(p) > 0 {
			return nil, nil, fmt.Errorf("--outbox log: the outbox on the records' store still holds %d pending messages; start with --outbox badger until they are sent", len(p))
		}
		// Read only when it holds anything: each message the log does not hold (an
		// Idempotency-Key's lookups, a caller's own id) would cost reads of it.
		if holds, err := badger.Holds(); err != nil {
			return nil, nil, fmt.Errorf("the outbox on the records' store: %w", err)
		} else if !holds {
			return nil, nil, nil
		}
		return badger, nil, nil
	}
	dir := filepath.Join(c.Data, "outbox")
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(segs) == 0 {
		return nil, nil, nil
	}
	lo, err := persist.OpenLogOutbox(dir, kv, persist.LogOutboxOptions{Sync: outlog.Sync(c.Fsync)})
	if err != nil {
		return nil, nil, fmt.Errorf("the outbox's log at %s: %w", dir, err)
	}
	p, err := lo.Pending()
	if err == nil && len(p) > 0 {
		err = fmt.Errorf("--outbox %s: the outbox's log at %s still holds %d pending messages; start with --outbox log until they are sent", c.Outbox, dir, len(p))
	} else if err != nil {
		err = fmt.Errorf("the outbox's log at %s: %w", dir, err)
	}
	if err != nil {
		_ = lo.Close()
		return nil, nil, err
	}
	return lo, lo, nil
}
