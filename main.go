// Command gateway is the messaging gateway: `gateway serve` runs it, `gateway token` mints a dev
// ID token, `gateway version` prints the version. main is the only place that reads flags and
// the environment and wires the packages together: configure → construct → run → wait.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/whatsapp"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/web"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "token":
		return token(args[1:], stdout, stderr)
	case "sim":
		return simCmd(args[1:], stderr)
	case "healthcheck":
		return healthcheck(args[1:], stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "gateway", version)
		return nil
	case "help", "-h", "-help", "--help":
		return help(args[1:], stdout)
	}
	if strings.HasPrefix(args[0], "-") {
		return serve(args, stderr) // flags without a command: serve's
	}
	return fmt.Errorf("unknown command %q (%s; see gateway --help)", args[0], commandNames())
}

// Interface guards: the adapters main wires into the core.
var (
	_ network.Network       = (*sim.Network)(nil)
	_ httpapi.SimControls   = (*sim.Network)(nil)
	_ account.Store         = persist.Accounts{}
	_ session.Records       = persist.Protections{}
	_ engine.Protections    = persist.Protections{}
	_ session.Store         = persist.Sessions{}
	_ engine.Store          = (*persist.Store)(nil)
	_ engine.Outbox         = (*persist.Outbox)(nil)
	_ engine.SessionStore   = persist.Sessions{}
	_ engine.CampaignStore  = (*persist.Campaigns)(nil)
	_ engine.ShopStore      = (*persist.Stores)(nil)
	_ engine.InboxStore     = (*persist.Inbox)(nil)
	_ engine.EventStore     = (*persist.Webhooks)(nil)
	_ engine.MessageHistory = (*persist.MessageLog)(nil)
	_ engine.Sealer         = (*persist.Sealer)(nil)
	_ persist.Durable       = (*persist.Badger)(nil)
	_ persist.Durable       = (*natskv.Store)(nil)
)

// config is every `gateway serve` flag (DESIGN.md section 6); each is also read from the
// environment as GATEWAY_<NAME> (upper case, - → _). A flag given on the command line wins.
type config struct {
	addr, data, fsync, network, auth    string
	store, natsURL, natsPrefix, nodeID  string
	natsCreds, natsTLSCA                string
	natsReplicas, natsStreams           int
	natsMaxBytes                        byteSize
	leaseTTL                            time.Duration
	oidcIssuer, oidcAudience            string
	adminUIDs, plans, defaultPlan       string
	publicURL, ecomAPIBase, ecomVersion string
	ecomClientID, ecomClientSecret      string
	internalCIDRs                       string
	dashboardClientID, firebaseAPIKey   string
	firebaseAuthURL                     string
	mediaMaxBytes                       int64
	mediaAllowPrivate                   bool
	webhookAllowPrivate                 bool
	bulkMaxRecipients                   int
	simAutopair, simLatency             time.Duration
	paceMinGap, paceJitter              time.Duration
	pacePerMinute, paceNewContacts      int
	paceRampDays, pacePerDay            int
	bootWindow                          time.Duration
	rejectCalls                         bool
	whatsappStore, ffmpeg               string
	requireWebhookSig                   bool
	bodyLimit                           int
	logLevel, logFormat                 string
	logRequests                         bool
	// logOut is where the logs go (serve sets it): the access log writes its batches there too.
	logOut                    io.Writer
	shutdownTimeout           time.Duration
	pprofAddr                 string
	minFreeDisk, memtableSize byteSize
	oidcAllowAnonymous        bool
	oidcRequireEmailVerified  bool
	corsOrigins               string
	clusterFlags
	// now is the engine's clock; nil is time.Now. Not a flag: tests move it, and afterFunc
	// with it (nil: time.AfterFunc).
	now       func() time.Time
	afterFunc func(time.Duration, func()) session.Timer
}

func parseServe(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", ":8080", "listen address")
	fs.StringVar(&c.data, "data", "./data", "data directory (Badger at DATA/db, dev issuer key at DATA/dev-idp.pem)")
	fs.StringVar(&c.fsync, "fsync", "batch", "batch: each group commit synced before replying; interval: synced every 100 ms")
	fs.StringVar(&c.store, "store", "badger", "where the records live: badger (DATA/db) or nats (JetStream: --nats)")
	fs.StringVar(&c.natsURL, "nats", "", "NATS servers, comma-separated (--store nats)")
	fs.StringVar(&c.natsPrefix, "nats-prefix", "gateway", "starts every NATS subject and stream name of this gateway (several gateways may share a NATS server)")
	fs.IntVar(&c.natsReplicas, "nats-replicas", 0, "replicas of the records stream (0 = 3 on a NATS cluster, else 1)")
	fs.Var(&c.natsMaxBytes, "nats-max-bytes", "size bound of the records stream (bytes, or with KiB, MiB, GiB; 0 = the server's store limit): when it is full, writes answer 503 storage_unavailable")
	fs.StringVar(&c.natsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.natsTLSCA, "nats-tls-ca", "", "CA certificate of the NATS servers' TLS")
	fs.StringVar(&c.nodeID, "node-id", "", "this gateway's name in NATS leases (default: the host name)")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 2*time.Second, "lifetime of a --store nats gateway's single-writer lease on its prefix, or of a cluster's partition leases (fixed when its buckets are first made; a node started without this flag takes the cluster's)")
	fs.IntVar(&c.natsStreams, "nats-streams", 3, "records streams of a cluster (partition p in stream p mod N, their leaders spread over the NATS servers); fixed when they are first made")
	fs.StringVar(&c.network, "network", "sim", "messaging network: sim (embedded) or whatsapp")
	fs.StringVar(&c.auth, "auth", "dev", "ID tokens: dev (embedded issuer) or oidc")
	fs.StringVar(&c.oidcIssuer, "oidc-issuer", "", "OIDC issuer URL (Firebase: https://securetoken.google.com/<project>)")
	fs.StringVar(&c.oidcAudience, "oidc-audience", "", "OIDC audience (Firebase: the project id)")
	fs.StringVar(&c.adminUIDs, "admin-uids", "", "comma list of admin uids")
	fs.StringVar(&c.plans, "plans", "", `plan table JSON file: {"<plan>": {"rate_limit": N, "monthly_messages": N}}`)
	fs.StringVar(&c.defaultPlan, "default-plan", "free", "plan of new users")
	fs.StringVar(&c.publicURL, "public-url", "http://localhost:8080", "public base URL (webhook addresses, OAuth redirects)")
	fs.StringVar(&c.ecomAPIBase, "ecom-api-base", "https://{shop}", "store-platform API base; {shop} is replaced")
	fs.StringVar(&c.ecomVersion, "ecom-api-version", "2026-10", "store-platform Admin API version")
	fs.StringVar(&c.ecomClientID, "ecom-client-id", "", "store-platform app client id (when oauth-init stored none)")
	fs.StringVar(&c.ecomClientSecret, "ecom-client-secret", "", "store-platform app client secret")
	fs.StringVar(&c.internalCIDRs, "internal-cidrs", "127.0.0.0/8,::1/128", "addresses allowed on the internal admin-prefixed routes without a token")
	fs.StringVar(&c.dashboardClientID, "dashboard-client-id", "", "OIDC client id of the dashboard (authorization-code flow with PKCE; --auth oidc)")
	fs.StringVar(&c.firebaseAPIKey, "firebase-api-key", "", "Firebase web API key: the dashboard signs in with email and password")
	fs.StringVar(&c.firebaseAuthURL, "firebase-auth-url", "https://identitytoolkit.googleapis.com", "Firebase Identity Toolkit base URL the dashboard calls (the Auth emulator's for local work)")
	fs.Int64Var(&c.mediaMaxBytes, "media-max-bytes", 16<<20, "largest media file")
	fs.BoolVar(&c.mediaAllowPrivate, "media-allow-private", false, "allow media URLs on private, loopback and link-local addresses")
	fs.BoolVar(&c.webhookAllowPrivate, "webhook-allow-private", false, "allow webhook subscription URLs on private, loopback and link-local addresses")
	fs.IntVar(&c.bulkMaxRecipients, "bulk-max-recipients", 1000, "most numbers in one bulk request")
	fs.DurationVar(&c.simAutopair, "sim-autopair", 0, "sim only: pair a session this long after its QR is shown (0 = never)")
	fs.DurationVar(&c.simLatency, "sim-latency", 0, "sim only: time each delivery takes")
	fs.BoolVar(&c.rejectCalls, "reject-calls", false, "whatsapp only: reject incoming calls")
	fs.StringVar(&c.whatsappStore, "whatsapp-store", "", "whatsapp only: the device store on PostgreSQL (postgres://user:pass@host/db); empty: SQLite at DATA/whatsapp.db")
	fs.StringVar(&c.ffmpeg, "ffmpeg", "", "whatsapp only: ffmpeg binary that converts voice notes (ptt) that are not Ogg/Opus; empty: such voice notes are refused")
	fs.DurationVar(&c.bootWindow, "boot-window", -1, "linked sessions reconnect at boot spread over this long (-1 = 2m on whatsapp, at once on sim)")
	fs.DurationVar(&c.paceMinGap, "pace-min-gap", -1, "least time between two sends of a session (-1 = the network's default: none on sim, see README for whatsapp)")
	fs.DurationVar(&c.paceJitter, "pace-jitter", -1, "random extra time added to each gap (-1 = the network's default)")
	fs.IntVar(&c.pacePerMinute, "pace-per-minute", -1, "most sends of a session in any minute (0 = no cap, -1 = the network's default)")
	fs.IntVar(&c.paceNewContacts, "pace-new-contacts", -1, "most first messages to new numbers per session per UTC day (0 = no cap, -1 = the network's default)")
	fs.IntVar(&c.paceRampDays, "pace-ramp-days", -1, "days over which a newly linked session's new-contact cap ramps up (-1 = the network's default)")
	fs.IntVar(&c.pacePerDay, "pace-per-day", -1, "most sends of a session per UTC day, replies included (0 = no cap, -1 = the network's default: none on sim, 1000 on whatsapp)")
	fs.BoolVar(&c.requireWebhookSig, "require-webhook-signature", false, "refuse store webhooks for stores without a signing secret")
	fs.IntVar(&c.bodyLimit, "body-limit", 1<<20, "request body limit in bytes (media routes allow media-max-bytes)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or text")
	fs.BoolVar(&c.logRequests, "log-requests", true, "one access-log line per request")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	fs.StringVar(&c.pprofAddr, "pprof", "", "serve net/http/pprof on this address (for profiling; keep it on loopback)")
	c.memtableSize = persist.DefaultMemTableSize
	fs.Var(&c.memtableSize, "memtable-size", "Badger's memtable size: every size of its tree follows from it, and the least --min-free-disk (README: Operations)")
	c.minFreeDisk = byteSize(persist.MinFreeDiskFor(persist.DefaultMemTableSize))
	fs.Var(&c.minFreeDisk, "min-free-disk", "free-space floor of the data disk (bytes, or with KiB, MiB, GiB): under it writes answer 503 storage_unavailable and /readyz is not ready; at least what Badger may write after writes stop (README: Operations), the default for the --memtable-size given; 0 disables it")
	fs.BoolVar(&c.oidcAllowAnonymous, "oidc-allow-anonymous", false, "accept Firebase anonymous sign-ins (refused by default)")
	fs.BoolVar(&c.oidcRequireEmailVerified, "oidc-require-email-verified", false, "refuse ID tokens whose email_verified claim is not true")
	fs.StringVar(&c.corsOrigins, "cors-origins", "", "comma list of browser origins allowed to call the API (CORS), or * for any; empty: no CORS headers")
	addClusterFlags(fs, &c.clusterFlags)
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if err := applyEnv(fs); err != nil {
		return c, err
	}
	set := setFlags(fs)
	if !set["min-free-disk"] {
		c.minFreeDisk = byteSize(persist.MinFreeDiskFor(int64(c.memtableSize)))
	}
	if err := c.check(); err != nil {
		return c, err
	}
	err := c.checkCluster(set)
	return c, err
}

// applyEnv sets every flag not given on the command line from GATEWAY_<NAME>.
func applyEnv(fs *flag.FlagSet) error { return applyEnvNamed(fs, envName) }

// applyEnvNamed sets every flag not given on the command line from the environment variable
// name(flag).
func applyEnvNamed(fs *flag.FlagSet, name func(flag string) string) error {
	given := setFlags(fs)
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := name(f.Name)
		if v, ok := os.LookupEnv(env); ok && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

// setFlags names the flags set so far: on the command line, and once applyEnv ran, by the
// environment.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func (c config) check() error {
	switch {
	case c.fsync != "batch" && c.fsync != "interval":
		return fmt.Errorf("--fsync must be batch or interval")
	case c.store != "badger" && c.store != "nats":
		return fmt.Errorf("--store must be badger or nats")
	case c.store == "nats" && c.natsURL == "":
		return fmt.Errorf("--store nats needs --nats (the NATS servers' URLs)")
	case c.store == "nats" && c.leaseTTL < 2*time.Second:
		return fmt.Errorf("--lease-ttl must be at least 2s")
	case c.network != "sim" && c.network != "whatsapp":
		return fmt.Errorf("--network must be sim or whatsapp")
	case c.whatsappStore != "" && !whatsapp.IsPostgresURL(c.whatsappStore):
		return fmt.Errorf("--whatsapp-store must be a postgres:// URL (or empty for SQLite in the data directory)")
	case c.ffmpeg != "" && !executable(c.ffmpeg):
		return fmt.Errorf("--ffmpeg %q: not an executable file", c.ffmpeg)
	case c.auth != "dev" && c.auth != "oidc":
		return fmt.Errorf("--auth must be dev or oidc")
	case c.auth == "oidc" && (c.oidcIssuer == "" || c.oidcAudience == ""):
		return fmt.Errorf("--auth oidc needs --oidc-issuer and --oidc-audience")
	case c.auth == "oidc" && identity.CheckIssuer(c.oidcIssuer) != nil:
		return identity.CheckIssuer(c.oidcIssuer)
	case c.mediaMaxBytes <= 0 || c.bulkMaxRecipients <= 0 || c.bodyLimit <= 0:
		return fmt.Errorf("--media-max-bytes, --bulk-max-recipients and --body-limit must be positive")
	case c.logFormat != "json" && c.logFormat != "text":
		return fmt.Errorf("--log-format must be json or text")
	case c.memtableSize < 1<<20 || c.memtableSize > 1<<30:
		return fmt.Errorf("--memtable-size must be 1 MiB to 1 GiB")
	case c.store == "badger" && c.minFreeDisk != 0 && int64(c.minFreeDisk) < persist.MinFreeDiskFor(int64(c.memtableSize)):
		return fmt.Errorf("--min-free-disk %s is under the %s Badger may still write after writes stop with %s memtables (flushes and compactions, README: Operations): give at least that, or a smaller --memtable-size",
			humanBytes(int64(c.minFreeDisk)), humanBytes(persist.MinFreeDiskFor(int64(c.memtableSize))), humanBytes(int64(c.memtableSize)))
	}
	if _, err := parseCIDRs(c.internalCIDRs); err != nil {
		return err
	}
	return nil
}

func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("--internal-cidrs: %w", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// accessLog is where the access log writes (nothing: through the logger, as in tests that
// build a gateway without serve; at a level above info: no access log at all).
func (c config) accessLog(log *slog.Logger) httpapi.AccessLogConfig {
	if c.logOut == nil || !log.Enabled(context.Background(), slog.LevelInfo) {
		return httpapi.AccessLogConfig{}
	}
	return httpapi.AccessLogConfig{Output: c.logOut, Text: c.logFormat == "text", Attrs: [][2]string{{"component", "http"}}}
}

func newLogger(c config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.logFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

func serve(args []string, stderr io.Writer) error {
	c, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// One writer for the logger and the access log's batches, so their lines never interleave.
	c.logOut = &httpapi.LockedWriter{W: stderr}
	log, err := newLogger(c, c.logOut)
	if err != nil {
		return err
	}
	// hollywood logs through the default logger: configure it once, here.
	slog.SetDefault(log.With("component", "actors"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// The address first: one that can never work fails the start before anything is opened
	// or logged (connections wait in the backlog until Serve).
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	g, err := build(ctx, c, log)
	if err != nil {
		ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- g.http.Serve(ln) }()
	log.Info("gateway listening", "addr", ln.Addr().String(), "version", version, "auth", c.auth, "network", c.network, "data", c.data, "store", c.store, "fsync", c.fsync)
	if c.pprofAddr != "" {
		go servePprof(c.pprofAddr, log)
	}
	if g.issuer != nil {
		logDevHelp(log, c, ln.Addr())
		printDevHelp(stderr, ln.Addr(), g.issuer)
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		g.shutdown(c.shutdownTimeout)
		return fmt.Errorf("serve: %w", err)
	case <-g.lost:
		if g.cluster != nil {
			// The node stopped for good (another process took its node id): its partitions are
			// fenced already; stop.
			err := g.cluster.node.Err()
			g.shutdown(c.shutdownTimeout)
			return fmt.Errorf("serve: left the cluster: %w", err)
		}
		// Another gateway took this NATS prefix: this one's state is stale; stop, never write.
		g.shutdown(c.shutdownTimeout)
		return fmt.Errorf("serve: lost the single-writer lease on NATS prefix %q to another gateway", c.natsPrefix)
	}
	g.shutdown(c.shutdownTimeout)
	log.Info("stopped")
	return nil
}

// gateway is the wired application.
type gateway struct {
	log      *slog.Logger
	kv       persist.Durable // Badger in the data dir, or JetStream (--store nats)
	lost     <-chan struct{} // closed when a --store nats gateway loses its lease (nil: never)
	engine   *engine.Engine
	events   *engine.Events // events out (webhooks)
	net      network.Network
	sim      *sim.Network // --network sim only
	http     *httpapi.Server
	issuer   *identity.Issuer // dev auth only
	verifier *identity.Verifier
	// --cluster: the NATS connection the store and the membership share, and this node.
	nc      *nats.Conn
	cluster *clusterNode
}

// build constructs every part from the configuration.
func build(ctx context.Context, c config, log *slog.Logger) (_ *gateway, err error) {
	// g is never nil here: returning (nil, err) must still close what was opened.
	g := &gateway{log: log}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	// Configuration errors first, before anything is opened.
	stores, err := storeConfig(c)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.data, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	plans := engine.DefaultPlans()
	if c.plans != "" {
		if plans, err = engine.LoadPlans(c.plans); err != nil {
			return nil, err
		}
	}
	// Storage before the identity provider: a data dir that cannot be opened fails the start at
	// once, before the provider is contacted (up to 2.5 s) or an outage of it is logged.
	if err := g.openStorage(ctx, c); err != nil {
		return nil, err
	}
	var verifier *identity.Verifier
	var issuer *identity.Issuer
	if c.cluster && c.auth == "dev" {
		// The dev issuer's key is the cluster's, in the store: every node verifies what any mints.
		pem, kerr := devIssuerKey(ctx, g.kv.(*natskv.Store), stores.Sealer)
		if kerr != nil {
			return nil, fmt.Errorf("dev issuer: %w", kerr)
		}
		verifier, issuer, err = identity.NewDevFromPEM(pem)
	} else {
		verifier, issuer, err = newVerifier(ctx, c, log)
	}
	if err != nil {
		return nil, err
	}
	g.issuer, g.verifier = issuer, verifier
	if err := g.openNetwork(c); err != nil {
		return nil, err
	}
	// Events out first: the engine publishes into it from boot on.
	reg := prometheus.NewRegistry()
	reg.MustRegister(verifier.Collectors()...)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_build_info", Help: "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 }))
	if s, ok := g.kv.(*natskv.Store); ok {
		stat := func(i int) func() float64 {
			return func() float64 { g, b := s.Stats(); return float64([]uint64{g, b}[i]) }
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_commits_total", Help: "Commit groups sent to NATS JetStream (a message or an atomic batch each)."}, stat(0)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_batches_total", Help: "Of those, atomic batches of more than one message."}, stat(1)))
	}
	if b, ok := g.kv.(*persist.Badger); ok {
		// What the records cost the store (bench/README.md reads them per message).
		stat := func(i int) func() float64 {
			return func() float64 { t, w, n := b.WriteStats(); return float64([]uint64{t, w, n}[i]) }
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_commits_total", Help: "Write transactions committed to Badger (group commits)."}, stat(0)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_writes_total", Help: "Records written or deleted in Badger's committed transactions."}, stat(1)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_write_bytes_total", Help: "Key and value bytes of those records."}, stat(2)))
	}
	if c.network == "whatsapp" {
		// How old the WhatsApp library is: WhatsApp retires old client builds (README, "Bumping
		// whatsmeow"); alert well before 30 days.
		if v, _, ok := whatsapp.Library(); ok {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "gateway_network_library_age_days", Help: "Days since the commit of the messaging network's library in this build (whatsmeow).",
				ConstLabels: prometheus.Labels{"library": "go.mau.fi/whatsmeow", "version": v},
			}, func() float64 { d, _ := whatsapp.LibraryAgeDays(time.Now()); return d }))
		}
	}
	cidrs, _ := parseCIDRs(c.internalCIDRs)
	identityCheck := func() error {
		if st := verifier.Status(); !st.Ready || st.Err != nil {
			return errors.New("unavailable")
		}
		return nil
	}
	var simControls httpapi.SimControls // nil unless --network sim (a nil *sim.Network is not)
	if g.sim != nil {
		simControls = g.sim
	}
	site, err := web.New()
	if err != nil {
		return nil, err
	}
	dash := httpapi.DashboardConfig{Site: site, Auth: c.auth, OIDCIssuer: c.oidcIssuer, ClientID: c.dashboardClientID,
		FirebaseAPIKey: c.firebaseAPIKey, FirebaseAuthURL: c.firebaseAuthURL, Endpoints: verifier.Endpoints}
	if issuer != nil { // a nil *Issuer in the interface would not be a nil TokenMinter
		dash.DevIssuer = issuer
	}
	hc := httpapi.Config{
		Verifier: verifier, DevRoles: c.auth == "dev", Logger: log.With("component", "http"),
		Registry: reg, InternalCIDRs: cidrs, BodyLimit: c.bodyLimit,
		CORSOrigins: splitList(c.corsOrigins), Storage: g.kv.Health,
		ReadyChecks: []httpapi.ReadyCheck{
			{Name: "storage", Critical: true, Check: g.kv.Health},
			{Name: "identity", Check: identityCheck},
		},
		LogRequests: c.logRequests, AccessLog: c.accessLog(log), Version: version, Sim: simControls, SimURL: c.simURL, BulkMaxRecipients: c.bulkMaxRecipients,
		Media:     httpapi.MediaOptions{MaxBytes: c.mediaMaxBytes, AllowPrivate: c.mediaAllowPrivate},
		Dashboard: dash, AudioCheck: c.audioCheck(),
	}
	if c.cluster {
		return g, g.joinCluster(ctx, c, hc, plans, stores, reg)
	}
	// Every typed store on the one KV; each part of the core gets the ones it uses, as the
	// interfaces it declares.
	recs := persist.NewRecords(g.kv)
	recs.Outbox.SetLogger(log.With("component", "outbox"))
	if g.events, err = newEvents(ctx, c, recs.Webhooks, reg, engine.NewSecretBox(stores.Sealer), log); err != nil {
		return nil, err
	}
	// The history index holds incoming messages now; earlier versions kept them in a table of
	// their own, moved once here.
	if n, err := recs.History.AdoptInbound(ctx); err != nil {
		return nil, fmt.Errorf("message history: %w", err)
	} else if n > 0 {
		log.Info("incoming messages moved into the message history", "messages", n)
	}
	g.engine, err = engine.New(engine.Config{
		Store: recs.Store, Records: engineRecords(recs), Logger: log.With("component", "engine"), Plans: plans,
		DefaultPlan: c.defaultPlan, AdminUIDs: strings.Split(c.adminUIDs, ","), DevRoles: c.auth == "dev",
		Network: g.net, Stores: stores, Now: c.now, AfterFunc: c.afterFunc, Pacing: c.pacing(), BootWindow: c.bootWindowOrDefault(),
		Events: g.events,
	})
	if err != nil {
		return nil, err
	}
	hc.Engine, hc.Webhooks = g.engine, g.events
	if g.http, err = httpapi.New(hc); err != nil {
		return nil, err
	}
	return g, nil
}

// newEvents builds events out (DESIGN.md section 10) and resumes the deliveries queued before
// the last stop or crash. Webhook URLs pass the media address checks unless
// --webhook-allow-private.
// Signing secrets are sealed at rest with the key of the store credentials.
func newEvents(ctx context.Context, c config, store engine.EventStore, reg prometheus.Registerer, secrets engine.SecretBox, log *slog.Logger) (*engine.Events, error) {
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	guard := media.Guard{AllowPrivate: c.webhookAllowPrivate}
	ev, err := engine.NewEvents(engine.EventsConfig{
		Store: store, Actors: hw, Log: log.With("component", "events"), Metrics: reg,
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), webhook.Timeout, 0), Guard: guard, Secrets: secrets,
	})
	if err != nil {
		return nil, err
	}
	if err := ev.Boot(ctx); err != nil {
		return nil, err
	}
	return ev, nil
}

// engineRecords hands persist's typed stores to the engine as the interfaces it declares.
func engineRecords(r *persist.Records) engine.Records {
	return engine.Records{Outbox: r.Outbox, Accounts: r.Accounts, Sessions: r.Sessions, Protections: r.Protections,
		Campaigns: r.Campaigns, Shops: r.Stores, Inbox: r.Inbox, History: r.History}
}

// storeConfig is the store integration's configuration: the store-platform client, the app
// credentials, and the key that seals store credentials at rest (GATEWAY_SECRET_KEY, else a key
// file in the data dir created on first use).
func storeConfig(c config) (engine.StoreConfig, error) {
	sc := engine.StoreConfig{
		Client:    ecom.NewClient(ecom.ClientOptions{APIBase: c.ecomAPIBase, APIVersion: c.ecomVersion}),
		PublicURL: c.publicURL, ClientID: c.ecomClientID, ClientSecret: c.ecomClientSecret,
		RequireSignature: c.requireWebhookSig,
	}
	var key []byte
	if v := os.Getenv("GATEWAY_SECRET_KEY"); v != "" {
		var err error
		if key, err = persist.ParseSecretKey(v); err != nil {
			return sc, fmt.Errorf("GATEWAY_SECRET_KEY: %w", err)
		}
	}
	// Without GATEWAY_SECRET_KEY, the key file is read (or created) when a first credential is
	// sealed or opened, so a gateway without stores never creates one.
	sc.Sealer = persist.NewSealer(key, filepath.Join(c.data, "secret.key"))
	return sc, nil
}

// shutdown stops in order: stop accepting and drain requests, stop actors (they flush their
// state), close storage.
func (g *gateway) shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if g.http != nil {
		if err := g.http.Shutdown(ctx); err != nil {
			g.log.Warn("http shutdown", "err", err)
		}
	}
	if g.cluster != nil {
		g.cluster.leave(ctx) // every partition handed over to the other nodes
	}
	if g.engine != nil {
		g.engine.Stop(ctx)
		g.engine = nil
	}
	if g.events != nil {
		g.events.Stop(ctx) // after the engine: its last status changes are published
		g.events = nil
	}
	g.close()
}

// openStorage opens the records store: Badger in DATA/db, or the records stream on NATS
// JetStream under the single-writer lease of --nats-prefix (README: NATS).
func (g *gateway) openStorage(ctx context.Context, c config) error {
	if c.store != "nats" {
		b, err := persist.OpenBadger(filepath.Join(c.data, "db"), persist.BadgerOptions{
			Fsync: persist.Fsync(c.fsync), Logger: g.log.With("component", "badger"), MinFreeDisk: int64(c.minFreeDisk),
			MemTableSize: int64(c.memtableSize),
		})
		if err != nil {
			return fmt.Errorf("open storage: %w", err)
		}
		g.kv = b
		return nil
	}
	o := natskv.Options{
		URL: c.natsURL, Prefix: c.natsPrefix, Replicas: c.natsReplicas, MaxBytes: int64(c.natsMaxBytes),
		Creds: c.natsCreds, TLSCA: c.natsTLSCA, NodeID: c.nodeID, LeaseTTL: c.leaseTTL,
		Logger: g.log.With("component", "nats"),
	}
	if c.cluster {
		// One connection for the store and the membership; no single-writer lease (the
		// partitions' leases and fences take its place), and fenced commits are batches.
		var err error
		if g.nc, err = natskv.Connect(o); err != nil {
			return fmt.Errorf("open storage: %w", err)
		}
		o.Conn, o.LeaseTTL, o.Streams, o.Partitions = g.nc, 0, c.natsStreams, c.partitions
	} else if err := refuseBesideCluster(ctx, c, o); err != nil {
		return err
	}
	s, err := natskv.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if c.cluster {
		if err := refuseBesideLone(ctx, c, s); err != nil {
			s.Close()
			return err
		}
	}
	g.kv, g.lost = s, s.Lost()
	return nil
}

// executable tells whether path (or a name on PATH) is a program.
func executable(path string) bool {
	_, err := exec.LookPath(path)
	return err == nil
}

// audioCheck is the accept-time check of audio sends: on WhatsApp, audio it cannot play is
// refused with 415 unless --ffmpeg converts it to a voice note.
func (c config) audioCheck() func([]byte, string) error {
	if c.network != "whatsapp" {
		return nil
	}
	convert := c.ffmpeg != ""
	return func(data []byte, mime string) error { return whatsapp.CheckAudio(data, mime, convert) }
}

// whatsappHTTPClient carries every WhatsApp connection when set: only a test build
// (fakewa_hook.go, build tag fakewa) sets it, to reach the fake server. Nil: the network's.
var whatsappHTTPClient *http.Client

// openNetwork opens the messaging network: the embedded simulation or WhatsApp.
func (g *gateway) openNetwork(c config) error {
	if c.network == "whatsapp" {
		// Process-wide settings of the WhatsApp libraries, made once before any client exists.
		whatsapp.RouteSignalLogs(g.log.With("component", "libsignal"))
		whatsapp.SetDeviceName("gateway")
		wa, err := whatsapp.Open(whatsapp.Options{DBPath: filepath.Join(c.data, "whatsapp.db"), StoreURL: c.whatsappStore,
			Logger: g.log.With("component", "whatsapp"), RejectCalls: c.rejectCalls, FFmpeg: c.ffmpeg,
			HTTPClient: whatsappHTTPClient})
		if err != nil {
			return fmt.Errorf("open whatsapp store: %w", err)
		}
		g.net = wa
		return nil
	}
	if c.simURL != "" {
		return g.openSimURL(c)
	}
	s, err := sim.Open(sim.Options{Dir: filepath.Join(c.data, "sim"), AutoPair: c.simAutopair, Latency: c.simLatency, Logger: g.log.With("component", "sim")})
	if err != nil {
		return fmt.Errorf("open sim network: %w", err)
	}
	g.net, g.sim = s, s
	return nil
}

func (g *gateway) close() {
	if g.cluster != nil {
		g.cluster.leave(context.Background())
		g.cluster = nil
	}
	if g.engine != nil {
		g.engine.Stop(context.Background())
		g.engine = nil
	}
	if g.events != nil {
		g.events.Stop(context.Background())
		g.events = nil
	}
	if g.net != nil {
		if err := g.net.Close(); err != nil {
			g.log.Warn("close network", "err", err)
		}
		g.net = nil
	}
	if g.verifier != nil {
		g.verifier.Close()
		g.verifier = nil
	}
	if g.kv != nil {
		if err := g.kv.Close(); err != nil {
			g.log.Warn("close storage", "err", err)
		}
		g.kv = nil
	}
	if g.nc != nil {
		g.nc.Close()
		g.nc = nil
	}
}

func newVerifier(ctx context.Context, c config, log *slog.Logger) (*identity.Verifier, *identity.Issuer, error) {
	if c.auth == "oidc" {
		v, err := identity.NewOIDC(ctx, c.oidcIssuer, c.oidcAudience, identity.OIDCOptions{
			Logger: log.With("component", "identity"), AllowAnonymous: c.oidcAllowAnonymous,
			RequireEmailVerified: c.oidcRequireEmailVerified,
		})
		return v, nil, err
	}
	return identity.NewDev(c.data)
}

// logDevHelp tells, as one log record, how to mint dev ID tokens and make a first call.
func logDevHelp(log *slog.Logger, c config, addr net.Addr) {
	port := "8080"
	if a, ok := addr.(*net.TCPAddr); ok {
		port = fmt.Sprint(a.Port)
	}
	bin := os.Args[0]
	if strings.Contains(bin, "go-build") {
		bin = "go run ." // started by `go run`
	}
	log.Info("embedded defaults: dev ID tokens; mint one and call the API (README.md shows a first session)",
		"network", c.network, "data", c.data,
		"admin_token", fmt.Sprintf("ADMIN=$(%s token --data %s --uid admin --role admin)", bin, c.data),
		"client_token", fmt.Sprintf("ALICE=$(%s token --data %s --uid alice --name Alice)", bin, c.data),
		"first_call", fmt.Sprintf(`curl -H "Authorization: Bearer $ADMIN" http://localhost:%s/api/admin/apikeys`, port))
}

// printDevHelp prints ready dashboard links (dev auth): make run's first screen.
func printDevHelp(w io.Writer, addr net.Addr, issuer *identity.Issuer) {
	port := "8080"
	if a, ok := addr.(*net.TCPAddr); ok {
		port = fmt.Sprint(a.Port)
	}
	// Ready dashboard links: the token rides in the fragment, which never reaches a server or a
	// log; the page takes it out of the address at once. They last 12 hours.
	admin, err1 := issuer.Mint(identity.TokenRequest{UID: "admin", Role: engine.RoleAdmin, Name: "Admin", TTL: 12 * time.Hour})
	alice, err2 := issuer.Mint(identity.TokenRequest{UID: "alice", Name: "Alice", Email: "alice@example.com", TTL: 12 * time.Hour})
	if err1 != nil || err2 != nil {
		return
	}
	fmt.Fprintf(w, `Open the dashboard (links valid for 12 hours; the form at /dashboard/ signs in as anyone):
  admin:  http://localhost:%[1]s/dashboard/#token=%[2]s
  client: http://localhost:%[1]s/dashboard/#token=%[3]s
  API reference: http://localhost:%[1]s/docs

`, port, admin, alice)
}

func token(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data directory holding dev-idp.pem (created if missing)")
	uid := fs.String("uid", "", "the user id the token is for (its sub claim); required")
	role := fs.String("role", "", "client or admin (honoured in dev auth only)")
	name := fs.String("name", "", "display name")
	email := fs.String("email", "", "email")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	store := fs.String("store", "badger", "where the dev issuer's key is: badger (DATA/dev-idp.pem) or nats (a cluster's, in its store; needs GATEWAY_SECRET_KEY)")
	natsURL := fs.String("nats", "", "NATS servers, comma-separated (--store nats)")
	natsPrefix := fs.String("nats-prefix", "gateway", "the cluster's NATS prefix (--store nats)")
	natsCreds := fs.String("nats-creds", "", "NATS credentials file")
	natsTLSCA := fs.String("nats-tls-ca", "", "CA certificate of the NATS servers' TLS")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	if *uid == "" {
		return errors.New("token: --uid is required")
	}
	if *role != "" && *role != engine.RoleClient && *role != engine.RoleAdmin {
		return errors.New("token: --role must be client or admin")
	}
	var issuer *identity.Issuer
	var err error
	switch *store {
	case "badger":
		_, issuer, err = identity.NewDev(*data)
	case "nats":
		issuer, err = clusterIssuer(natskv.Options{URL: *natsURL, Prefix: *natsPrefix, Creds: *natsCreds, TLSCA: *natsTLSCA})
	default:
		err = errors.New("token: --store must be badger or nats")
	}
	if err != nil {
		return err
	}
	tok, err := issuer.Mint(identity.TokenRequest{UID: *uid, Role: *role, Name: *name, Email: *email, TTL: *ttl})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// servePprof serves the runtime profiles (CPU, heap, allocations, goroutines) on their own
// listener, so they are never reachable through the API's address.
func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof listening", "addr", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		log.Error("pprof", "err", err)
	}
}

// pacing is the network's default pacing (whatsapp.DefaultPacing, whose sources README
// "WhatsApp" cites; none on the sim) with the --pace-* flags over it (-1 keeps the default).
func (c config) pacing() domain.Pacing {
	var p domain.Pacing
	if c.network == "whatsapp" {
		w := whatsapp.DefaultPacing
		p = domain.Pacing{MinGapMs: w.MinGap.Milliseconds(), JitterMs: w.Jitter.Milliseconds(), PerMinute: w.PerMinute,
			NewContactsPerDay: w.NewContactsPerDay, NewContactsFirstDay: w.NewContactsFirstDay, RampDays: w.RampDays,
			PerDay: whatsappPerDay}
	}
	if c.paceMinGap >= 0 {
		p.MinGapMs = c.paceMinGap.Milliseconds()
	}
	if c.paceJitter >= 0 {
		p.JitterMs = c.paceJitter.Milliseconds()
	}
	if c.pacePerMinute >= 0 {
		p.PerMinute = c.pacePerMinute
	}
	if c.paceNewContacts >= 0 {
		p.NewContactsPerDay = c.paceNewContacts
	}
	if c.paceRampDays >= 0 {
		p.RampDays = c.paceRampDays
	}
	if c.pacePerDay >= 0 {
		p.PerDay = c.pacePerDay
	}
	return p
}

// whatsappPerDay is a WhatsApp session's default daily total, replies included (README,
// "Sessions on the live network", gives its sources): WhatsApp's own Business Platform starts a
// new business at 250 conversations opened a day and lets it reach 2,000 only after a review.
const whatsappPerDay = 1000

// bootWindowOrDefault is --boot-window, or the network's default (-1).
func (c config) bootWindowOrDefault() time.Duration {
	switch {
	case c.bootWindow >= 0:
		return c.bootWindow
	case c.network == "whatsapp":
		return network.DefaultBootWindow
	}
	return 0
}

// byteSize is a flag value in bytes, written as a number with an optional KiB/MiB/GiB (or
// KB/MB/GB, K/M/G: the same powers of 1024) suffix.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	v = strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a size such as 268435456 or 256MiB")
	}
	*b = byteSize(n * mult)
	return nil
}

// envName is the environment variable that sets a flag: GATEWAY_<NAME>, upper case, - → _.
func envName(flag string) string {
	return "GATEWAY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// healthcheck asks a gateway on this machine whether it is ready (GET /readyz on --addr or
// GATEWAY_ADDR): the container's HEALTHCHECK, where there is no curl.
func healthcheck(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ":8080", "the gateway's listen address")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("healthcheck: --addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: 2 * time.Second}
	res, err := client.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: not ready: %d %s", res.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
