package node

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/natsevents"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/whatsapp"
	"github.com/gateway/gateway/persist"
)

// Config is everything a node is built from: `gateway serve`'s flags (DESIGN.md section 6),
// typed, each named after its flag; the command line and the environment are main's to read.
// Where a flag's default is -1, -1 here means the network's default too.
type Config struct {
	Data  string // data directory (Badger at Data/db, the dev issuer's key, the sim's journal)
	Fsync string // batch or interval (Badger, and the outbox's log)
	// Outbox is where the outbox lives: "badger" (the records' store) or "log" (a log of its
	// own at Data/outbox: persist.LogOutbox; a lone gateway's, not --store nats); "" picks
	// (pickOutbox: log, unless --store nats or the records' store's outbox holds pending).
	Outbox string

	// Store is where the records live: "badger" (Data/db) or "nats" (JetStream at NATSURL).
	Store        string
	NATSURL      string // comma-separated
	NATSPrefix   string
	NATSReplicas int   // 0: 3 on a NATS cluster, else 1
	NATSMaxBytes int64 // 0: the server's store limit
	NATSCreds    string
	NATSTLSCA    string
	NodeID       string // the lease holder's name (main's default: <host name>:<port>)
	// LeaseTTL is the single-writer lease's (--store nats; 0: DefaultSingleLeaseTTL), or with
	// Cluster the partitions' (0: the cluster's, fixed in its buckets; a new cluster's:
	// DefaultLeaseTTL).
	LeaseTTL time.Duration
	// NATSStreams is how many records streams a new cluster's partitions are spread over (0:
	// follow the NATS servers, one stream per server that can lead one, at most 3:
	// persist/natskv.Options.Streams); an existing cluster keeps its layout.
	NATSStreams int
	// NATSOutcomeRecords writes an outcome record per message, as the release before outcome
	// pages did, instead of pages (persist.Outbox.WriteOutcomeRecords): a cluster's nodes
	// during a rolling upgrade from that release, until every node runs this one.
	NATSOutcomeRecords bool
	// NATSWindowPages keeps a cluster's outcome pages per 10 ms window, written as they come,
	// as the release before coarse pages (persist.Outbox.PagesPerSecond, which that release's reads
	// by id and boots do not find): every node during a rolling upgrade from that release,
	// until every node runs this one.
	NATSWindowPages bool

	// Cluster runs the node as one of a cluster (DESIGN.md section 13) on NATS, with
	// Partitions partitions; SimURL is a `gateway sim` process's address (the network every
	// node shares).
	Cluster    bool
	Partitions int
	SimURL     string

	// EventsNATS publishes every event to NATS JetStream at these servers (comma-separated;
	// "": not at all), on subjects <EventsSubjectPrefix>.<userId>.<type> (DESIGN.md section
	// 20, natsevents); EventsNATSBacklog bounds the events waiting for it (0: the engine's
	// default), over every partition of a cluster node.
	EventsNATS, EventsSubjectPrefix  string
	EventsNATSCreds, EventsNATSTLSCA string
	EventsNATSReplicas               int // 0: 3 on a NATS cluster, else 1
	EventsNATSBacklog                int

	Network string // "sim" or "whatsapp"
	Auth    string // "dev" (embedded issuer) or "oidc"

	OIDCIssuer, OIDCAudience string
	OIDCAllowAnonymous       bool
	OIDCRequireEmailVerified bool

	AdminUIDs   []string
	PlansFile   string // the plan table (JSON); "": engine.DefaultPlans
	DefaultPlan string

	PublicURL, EcomAPIBase, EcomVersion string
	EcomClientID, EcomClientSecret      string
	RequireWebhookSignature             bool
	// SecretKey is GATEWAY_SECRET_KEY (64 hex digits or base64): it seals store credentials,
	// webhook secrets and a cluster's dev issuer key; "": a key file in Data, made on first use.
	SecretKey string

	InternalCIDRs     []netip.Prefix
	DashboardClientID string
	FirebaseAPIKey    string
	FirebaseAuthURL   string
	CORSOrigins       []string

	MediaMaxBytes       int64
	MediaAllowPrivate   bool
	WebhookAllowPrivate bool
	BulkMaxRecipients   int
	BodyLimit           int

	SimAutopair, SimLatency time.Duration // the embedded sim's

	PaceMinGap, PaceJitter         time.Duration // -1: the network's default
	PacePerMinute, PaceNewContacts int           // -1: the network's default
	PaceRampDays, PacePerDay       int           // -1: the network's default
	BootWindow                     time.Duration // -1: the network's default
	RejectCalls                    bool
	WhatsAppStore, FFmpeg          string
	MinFreeDisk, MemTableSize      int64 // Badger's (bytes; main checks them against each other)
	ShutdownTimeout                time.Duration
	LogRequests                    bool
	LogFormat                      string    // json or text: the access log's, as the logger's
	LogOut                         io.Writer // the access log's batches (nil: through the logger)
	Version                        string    // the build's (metrics, /healthz)

	// Now is the engine's clock (nil: time.Now) and AfterFunc its timers (nil:
	// time.AfterFunc). Not flags: tests move them.
	Now       func() time.Time
	AfterFunc func(time.Duration, func()) session.Timer
	// CloudGraphURL and CloudGraphVersion are the Graph API of the Cloud API network (DESIGN.md
	// section 17; tests point the URL at a fake); CloudInDoubt how long a cloud send whose
	// answer was lost waits for Meta's status before it goes again (0: the network's default).
	CloudGraphURL, CloudGraphVersion string
	CloudInDoubt                     time.Duration
	// WhatsAppHTTPClient carries every WhatsApp connection when set (a test build reaches the
	// fake server with it); nil: the network's own.
	WhatsAppHTTPClient *http.Client
	// KV holds the records instead of Store (tests: persist.Memory); the node closes it last.
	KV persist.Durable
}

// DiskFlags registers --fsync and --outbox (the local disk's) on fs.
func (c *Config) DiskFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Fsync, "fsync", "batch", "batch: each group commit synced before replying; interval: synced every 100 ms")
	fs.StringVar(&c.Outbox, "outbox", "", "where the outbox lives: badger (the records' store) or log (a log of its own at DATA/outbox; not with --store nats); default: log, or badger with --store nats or while the records' store's outbox holds pending messages")
}

// Check refuses a configuration that can never run, before anything is opened (DESIGN.md
// section 13.1's refusals that need no NATS included). Each error names the flag to change.
func (c Config) Check() error {
	switch {
	case c.Fsync != "batch" && c.Fsync != "interval":
		return fmt.Errorf("--fsync must be batch or interval")
	case c.Store != "badger" && c.Store != "nats":
		return fmt.Errorf("--store must be badger or nats")
	case c.Outbox != "" && c.Outbox != "badger" && c.Outbox != "log":
		return fmt.Errorf("--outbox must be badger or log")
	case c.Store == "nats" && c.NATSURL == "":
		return fmt.Errorf("--store nats needs --nats (the NATS servers' URLs)")
	case c.Store == "nats" && c.LeaseTTL != 0 && c.LeaseTTL < 2*time.Second:
		return fmt.Errorf("--lease-ttl must be at least 2s")
	case c.NATSStreams < 0 || c.NATSStreams > 64:
		return fmt.Errorf("--nats-streams must be 0 (follow the NATS servers) to 64")
	case c.Network != "sim" && c.Network != "whatsapp":
		return fmt.Errorf("--network must be sim or whatsapp")
	case c.WhatsAppStore != "" && !whatsapp.IsPostgresURL(c.WhatsAppStore):
		return fmt.Errorf("--whatsapp-store must be a postgres:// URL (or empty for SQLite in the data directory)")
	case c.FFmpeg != "" && !executable(c.FFmpeg):
		return fmt.Errorf("--ffmpeg %q: not an executable file", c.FFmpeg)
	case c.Auth != "dev" && c.Auth != "oidc":
		return fmt.Errorf("--auth must be dev or oidc")
	case c.Auth == "oidc" && (c.OIDCIssuer == "" || c.OIDCAudience == ""):
		return fmt.Errorf("--auth oidc needs --oidc-issuer and --oidc-audience")
	case c.Auth == "oidc" && identity.CheckIssuer(c.OIDCIssuer) != nil:
		return identity.CheckIssuer(c.OIDCIssuer)
	case c.CloudGraphURL != "" && !strings.HasPrefix(c.CloudGraphURL, "https://") && !strings.HasPrefix(c.CloudGraphURL, "http://"):
		return fmt.Errorf("--cloud-graph-url %q: want https://host", c.CloudGraphURL)
	case c.CloudGraphVersion != "" && !validGraphVersion(c.CloudGraphVersion):
		return fmt.Errorf("--cloud-graph-version %q: want vN.0 (e.g. v27.0)", c.CloudGraphVersion)
	case c.MediaMaxBytes <= 0 || c.BulkMaxRecipients <= 0 || c.BodyLimit <= 0:
		return fmt.Errorf("--media-max-bytes, --bulk-max-recipients and --body-limit must be positive")
	}
	if c.KV != nil && c.Cluster {
		return fmt.Errorf("node: Config.KV holds a single node's records; a cluster's are on NATS")
	}
	if err := c.checkEvents(); err != nil {
		return err
	}
	if err := c.checkCluster(); err != nil {
		return err
	}
	if c.Outbox == "log" && c.Store == "nats" {
		return fmt.Errorf("--outbox log is a lone gateway's local disk: not with --store nats (use --outbox badger)")
	}
	return nil
}

// checkEvents checks the settings of events on NATS (natsevents: DESIGN.md section 20).
func (c Config) checkEvents() error {
	if c.EventsNATS == "" {
		return nil
	}
	prefix := cmp.Or(c.EventsSubjectPrefix, natsevents.DefaultPrefix)
	switch err := natsevents.CheckPrefix(prefix); {
	case err != nil:
		return err
	case c.EventsNATSBacklog < 0 || c.EventsNATSReplicas < 0:
		return fmt.Errorf("--events-nats-backlog and --events-nats-replicas must not be negative")
	case c.Store == "nats" && sameServers(c.NATSURL, c.EventsNATS) && strings.HasPrefix(prefix+".", c.NATSPrefix+"."):
		// The records stream captures <nats-prefix>.*.*.>: JetStream refuses a second stream
		// over the same subjects (and the events stream would capture the cluster's own).
		return fmt.Errorf("--events-subject-prefix %q is under --nats-prefix %q on the same NATS servers: the records' subjects would overlap the events' (choose --events-subject-prefix events.%s, say)", prefix, c.NATSPrefix, c.NATSPrefix)
	}
	return nil
}

// sameServers tells whether two comma-separated NATS URL lists name a server in common.
func sameServers(a, b string) bool {
	norm := func(u string) string {
		u = strings.TrimSpace(u)
		u = strings.TrimPrefix(strings.TrimPrefix(u, "nats://"), "tls://")
		if at := strings.LastIndexByte(u, '@'); at >= 0 {
			u = u[at+1:]
		}
		return strings.TrimSuffix(u, "/")
	}
	for _, x := range strings.Split(a, ",") {
		for _, y := range strings.Split(b, ",") {
			if norm(x) != "" && norm(x) == norm(y) {
				return true
			}
		}
	}
	return false
}

// checkCluster checks the cluster's settings (DESIGN.md section 13.1).
func (c Config) checkCluster() error {
	if c.Cluster {
		switch {
		case c.Store != "nats":
			return fmt.Errorf("--cluster needs --store nats (every node's records are in one JetStream stream)")
		case c.SecretKey == "":
			return fmt.Errorf("--cluster needs GATEWAY_SECRET_KEY, the same on every node (it seals store credentials, webhook secrets and the dev issuer's key; a key file in one node's data dir would not open the others' records)")
		case c.Network == "whatsapp" && !whatsapp.IsPostgresURL(c.WhatsAppStore):
			return fmt.Errorf("--cluster --network whatsapp needs --whatsapp-store postgres://... (a session's device store must be reachable from whichever node runs it)")
		case c.Network == "sim" && c.SimURL == "":
			return fmt.Errorf("--cluster --network sim needs --sim-url (one `gateway sim` process every node shares: a session moves between nodes)")
		case c.Partitions < 1 || c.Partitions > 4096:
			return fmt.Errorf("--partitions must be 1 to 4096")
		case c.LeaseTTL%time.Second != 0:
			return fmt.Errorf("--lease-ttl must be whole seconds with --cluster")
		}
	}
	if c.SimURL != "" {
		if c.Network != "sim" {
			return fmt.Errorf("--sim-url needs --network sim")
		}
		if !strings.HasPrefix(c.SimURL, "http://") && !strings.HasPrefix(c.SimURL, "https://") {
			return fmt.Errorf("--sim-url %q: want http://host:port", c.SimURL)
		}
	}
	return nil
}

// executable tells whether path (or a name on PATH) is a program.
func executable(path string) bool {
	_, err := exec.LookPath(path)
	return err == nil
}

// audioCheck is the accept-time check of audio sends: on WhatsApp, audio it cannot play is
// refused with 415 unless --ffmpeg converts it to a voice note.
func (c Config) audioCheck() func([]byte, string, bool) error {
	if c.Network != "whatsapp" {
		return nil
	}
	convert := c.FFmpeg != ""
	return func(data []byte, mime string, ptt bool) error { return whatsapp.CheckAudio(data, mime, ptt, convert) }
}

// pacing is the network's default pacing (whatsapp.DefaultPacing, whose sources README
// "WhatsApp" cites; none on the sim) with the --pace-* settings over it (-1 keeps the default).
func (c Config) pacing() domain.Pacing {
	var p domain.Pacing
	if c.Network == "whatsapp" {
		w := whatsapp.DefaultPacing
		p = domain.Pacing{MinGapMs: w.MinGap.Milliseconds(), JitterMs: w.Jitter.Milliseconds(), PerMinute: w.PerMinute,
			NewContactsPerDay: w.NewContactsPerDay, NewContactsFirstDay: w.NewContactsFirstDay, RampDays: w.RampDays,
			PerDay: whatsappPerDay}
	}
	if c.PaceMinGap >= 0 {
		p.MinGapMs = c.PaceMinGap.Milliseconds()
	}
	if c.PaceJitter >= 0 {
		p.JitterMs = c.PaceJitter.Milliseconds()
	}
	if c.PacePerMinute >= 0 {
		p.PerMinute = c.PacePerMinute
	}
	if c.PaceNewContacts >= 0 {
		p.NewContactsPerDay = c.PaceNewContacts
	}
	if c.PaceRampDays >= 0 {
		p.RampDays = c.PaceRampDays
	}
	if c.PacePerDay >= 0 {
		p.PerDay = c.PacePerDay
	}
	return p
}

// whatsappPerDay is a WhatsApp session's default daily total, replies included (README,
// "Sessions on the live network", gives its sources): WhatsApp's own Business Platform starts a
// new business at 250 conversations opened a day and lets it reach 2,000 only after a review.
const whatsappPerDay = 1000

// bootWindow is BootWindow, or the network's default (-1).
func (c Config) bootWindow() time.Duration {
	switch {
	case c.BootWindow >= 0:
		return c.BootWindow
	case c.Network == "whatsapp":
		return network.DefaultBootWindow
	}
	return 0
}

// accessLog is where the access log writes (nothing: through the logger, as in tests that
// give no LogOut; at a level above info: no access log at all).
func (c Config) accessLog(log *slog.Logger) httpapi.AccessLogConfig {
	if c.LogOut == nil || !log.Enabled(context.Background(), slog.LevelInfo) {
		return httpapi.AccessLogConfig{}
	}
	return httpapi.AccessLogConfig{Output: c.LogOut, Text: c.LogFormat == "text", Attrs: [][2]string{{"component", "http"}}}
}

// DefaultPartitions is a cluster's partition count unless --partitions says otherwise.
const DefaultPartitions = cluster.DefaultPartitions

// validGraphVersion tells whether v reads as a Graph API version: v, digits, a dot, digits.
func validGraphVersion(v string) bool {
	rest, ok := strings.CutPrefix(v, "v")
	major, minor, dot := strings.Cut(rest, ".")
	return ok && dot && major != "" && minor != "" && strings.Trim(major, "0123456789") == "" && strings.Trim(minor, "0123456789") == ""
}

// DefaultLeaseTTL is the partitions' lease TTL in a new cluster (DESIGN.md section 19): a
// lost node's partitions are taken over when it lapses.
const DefaultLeaseTTL = cluster.DefaultLeaseTTL

// DefaultSingleLeaseTTL is a lone --store nats gateway's single-writer lease TTL. No other
// gateway waits on it but the same one restarted after a kill -9, and the gateway stops
// writing when it has not renewed it for the TTL less a second: a 2 s lease would turn a
// second's stall (a CPU-starved machine, a long GC) into 503s.
const DefaultSingleLeaseTTL = 5 * time.Second
