package main

// `gateway serve`'s flags (DESIGN.md section 6) read into a node.Config; each flag is also read
// from the environment as GATEWAY_<NAME> (upper case, - → _), and a flag given on the command
// line wins.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gateway/gateway/node"
	"github.com/gateway/gateway/persist"
)

// serveConfig is every `gateway serve` flag: the node's Config, and the few main keeps.
type serveConfig struct {
	node.Config
	addr, logLevel, pprofAddr string
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	var adminUIDs, internalCIDRs, corsOrigins string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", ":8080", "listen address")
	fs.StringVar(&c.Data, "data", "./data", "data directory (Badger at DATA/db, dev issuer key at DATA/dev-idp.pem)")
	c.DiskFlags(fs) // --fsync, --outbox
	fs.StringVar(&c.Store, "store", "badger", "where the records live: badger (DATA/db) or nats (JetStream: --nats)")
	fs.StringVar(&c.NATSURL, "nats", "", "NATS servers, comma-separated (--store nats)")
	fs.StringVar(&c.NATSPrefix, "nats-prefix", "gateway", "starts every NATS subject and stream name of this gateway (several gateways may share a NATS server)")
	fs.IntVar(&c.NATSReplicas, "nats-replicas", 0, "replicas of the records stream (0 = 3 on a NATS cluster, else 1)")
	fs.Var((*byteSize)(&c.NATSMaxBytes), "nats-max-bytes", "size bound of the records stream (bytes, or with KiB, MiB, GiB; 0 = the server's store limit): when it is full, writes answer 503 storage_unavailable")
	fs.StringVar(&c.NATSCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.NATSTLSCA, "nats-tls-ca", "", "CA certificate of the NATS servers' TLS")
	fs.StringVar(&c.NodeID, "node-id", "", "this gateway's name in NATS leases (default: the host name)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 0, "lifetime of a --store nats gateway's single-writer lease on its prefix (0: 5s); with --cluster, of the partitions' leases (0: the cluster's, fixed when its buckets are first made; 2s for a new cluster)")
	fs.BoolVar(&c.NATSOutcomeRecords, "nats-outcome-records", false, "write an outcome record per message instead of outcome pages, as the release before pages: on every node of a cluster while any still runs that release (a rolling upgrade), then restart without it")
	fs.BoolVar(&c.NATSWindowPages, "nats-window-pages", false, "--cluster: write outcome pages per 10 ms window as they are written, as the release before coarse pages, not held and per second: on every node while any still runs that release (a rolling upgrade), then restart without it")
	fs.IntVar(&c.NATSStreams, "nats-streams", 0, "records streams a new cluster spreads its partitions over (partition p in stream p mod N), their leaders spread over the NATS servers; 0: one per server that can lead one, at most 3 (1 on a single NATS server); fixed when they are first made")
	fs.StringVar(&c.Network, "network", "sim", "messaging network: sim (embedded) or whatsapp")
	fs.StringVar(&c.Auth, "auth", "dev", "ID tokens: dev (embedded issuer) or oidc")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "OIDC issuer URL (Firebase: https://securetoken.google.com/<project>)")
	fs.StringVar(&c.OIDCAudience, "oidc-audience", "", "OIDC audience (Firebase: the project id)")
	fs.StringVar(&adminUIDs, "admin-uids", "", "comma list of admin uids")
	fs.StringVar(&c.PlansFile, "plans", "", `plan table JSON file: {"<plan>": {"rate_limit": N, "monthly_messages": N}}`)
	fs.StringVar(&c.DefaultPlan, "default-plan", "free", "plan of new users")
	fs.StringVar(&c.PublicURL, "public-url", "http://localhost:8080", "public base URL (webhook addresses, OAuth redirects)")
	fs.StringVar(&c.EcomAPIBase, "ecom-api-base", "https://{shop}", "store-platform API base; {shop} is replaced")
	fs.StringVar(&c.EcomVersion, "ecom-api-version", "2026-10", "store-platform Admin API version")
	fs.StringVar(&c.EcomClientID, "ecom-client-id", "", "store-platform app client id (when oauth-init stored none)")
	fs.StringVar(&c.EcomClientSecret, "ecom-client-secret", "", "store-platform app client secret")
	fs.StringVar(&internalCIDRs, "internal-cidrs", "127.0.0.0/8,::1/128", "addresses allowed on the internal admin-prefixed routes without a token")
	fs.StringVar(&c.DashboardClientID, "dashboard-client-id", "", "OIDC client id of the dashboard (authorization-code flow with PKCE; --auth oidc)")
	fs.StringVar(&c.FirebaseAPIKey, "firebase-api-key", "", "Firebase web API key: the dashboard signs in with email and password")
	fs.StringVar(&c.FirebaseAuthURL, "firebase-auth-url", "https://identitytoolkit.googleapis.com", "Firebase Identity Toolkit base URL the dashboard calls (the Auth emulator's for local work)")
	fs.Int64Var(&c.MediaMaxBytes, "media-max-bytes", 16<<20, "largest media file")
	fs.BoolVar(&c.MediaAllowPrivate, "media-allow-private", false, "allow media URLs on private, loopback and link-local addresses")
	fs.BoolVar(&c.WebhookAllowPrivate, "webhook-allow-private", false, "allow webhook subscription URLs on private, loopback and link-local addresses")
	fs.IntVar(&c.BulkMaxRecipients, "bulk-max-recipients", 1000, "most numbers in one bulk request")
	fs.DurationVar(&c.SimAutopair, "sim-autopair", 0, "sim only: pair a session this long after its QR is shown (0 = never)")
	fs.DurationVar(&c.SimLatency, "sim-latency", 0, "sim only: time each delivery takes")
	fs.BoolVar(&c.RejectCalls, "reject-calls", false, "whatsapp only: reject incoming calls")
	fs.StringVar(&c.CloudGraphURL, "cloud-graph-url", node.DefaultCloudGraphURL, "the Graph API of Meta's WhatsApp Cloud API (cloud sessions; README: Cloud API)")
	fs.StringVar(&c.CloudGraphVersion, "cloud-graph-version", node.DefaultCloudGraphVersion, "the Graph API version cloud sessions speak")
	fs.DurationVar(&c.CloudInDoubt, "cloud-in-doubt", node.DefaultCloudInDoubt, "how long a Cloud API send whose answer was lost waits for Meta's status naming it before it is sent again")
	fs.StringVar(&c.WhatsAppStore, "whatsapp-store", "", "whatsapp only: the device store on PostgreSQL (postgres://user:pass@host/db); empty: SQLite at DATA/whatsapp.db")
	fs.StringVar(&c.FFmpeg, "ffmpeg", "", "whatsapp only: ffmpeg binary that converts voice notes (ptt) that are not Ogg/Opus; empty: such voice notes are refused")
	fs.DurationVar(&c.BootWindow, "boot-window", -1, "linked sessions reconnect at boot spread over this long (-1 = 2m on whatsapp, at once on sim)")
	fs.DurationVar(&c.PaceMinGap, "pace-min-gap", -1, "least time between two sends of a session (-1 = the network's default: none on sim, see README for whatsapp)")
	fs.DurationVar(&c.PaceJitter, "pace-jitter", -1, "random extra time added to each gap (-1 = the network's default)")
	fs.IntVar(&c.PacePerMinute, "pace-per-minute", -1, "most sends of a session in any minute (0 = no cap, -1 = the network's default)")
	fs.IntVar(&c.PaceNewContacts, "pace-new-contacts", -1, "most first messages to new numbers per session per UTC day (0 = no cap, -1 = the network's default)")
	fs.IntVar(&c.PaceRampDays, "pace-ramp-days", -1, "days over which a newly linked session's new-contact cap ramps up (-1 = the network's default)")
	fs.IntVar(&c.PacePerDay, "pace-per-day", -1, "most sends of a session per UTC day, replies included (0 = no cap, -1 = the network's default: none on sim, 1000 on whatsapp)")
	fs.BoolVar(&c.RequireWebhookSignature, "require-webhook-signature", false, "refuse store webhooks for stores without a signing secret")
	fs.IntVar(&c.BodyLimit, "body-limit", 1<<20, "request body limit in bytes (media routes allow media-max-bytes)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or text")
	fs.BoolVar(&c.LogRequests, "log-requests", true, "one access-log line per request")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	fs.StringVar(&c.pprofAddr, "pprof", "", "serve net/http/pprof on this address (for profiling; keep it on loopback)")
	c.MemTableSize = persist.DefaultMemTableSize
	fs.Var((*byteSize)(&c.MemTableSize), "memtable-size", "Badger's memtable size: every size of its tree follows from it, and the least --min-free-disk (README: Operations)")
	c.MinFreeDisk = persist.MinFreeDiskFor(persist.DefaultMemTableSize)
	fs.Var((*byteSize)(&c.MinFreeDisk), "min-free-disk", "free-space floor of the data disk (bytes, or with KiB, MiB, GiB): under it writes answer 503 storage_unavailable and /readyz is not ready; at least what Badger may write after writes stop (README: Operations), the default for the --memtable-size given; 0 disables it")
	fs.BoolVar(&c.OIDCAllowAnonymous, "oidc-allow-anonymous", false, "accept Firebase anonymous sign-ins (refused by default)")
	fs.BoolVar(&c.OIDCRequireEmailVerified, "oidc-require-email-verified", false, "refuse ID tokens whose email_verified claim is not true")
	fs.StringVar(&corsOrigins, "cors-origins", "", "comma list of browser origins allowed to call the API (CORS), or * for any; empty: no CORS headers")
	// The cluster's (DESIGN.md section 13); --node-id, --lease-ttl are --store nats' (above).
	fs.BoolVar(&c.Cluster, "cluster", false, "run as one node of a cluster on NATS JetStream (needs --store nats and GATEWAY_SECRET_KEY; README: Cluster)")
	fs.IntVar(&c.Partitions, "partitions", node.DefaultPartitions, "partitions of the cluster, fixed when its buckets are first made")
	fs.StringVar(&c.SimURL, "sim-url", "", "use the simulated network of a `gateway sim` process at this URL (http://host:port) instead of an embedded one")
	// Events on NATS JetStream (DESIGN.md section 20; README: Integrations).
	fs.StringVar(&c.EventsNATS, "events-nats", "", "also publish every event to NATS JetStream at these servers (comma-separated URLs): subjects <prefix>.<userId>.<type> on a stream kept 7 days")
	fs.StringVar(&c.EventsSubjectPrefix, "events-subject-prefix", node.DefaultEventsSubjectPrefix, "--events-nats: the subjects' prefix (the stream is named after it, dots as underscores)")
	fs.StringVar(&c.EventsNATSCreds, "events-nats-creds", "", "--events-nats: NATS credentials file")
	fs.StringVar(&c.EventsNATSTLSCA, "events-nats-tls-ca", "", "--events-nats: CA certificate of the NATS servers' TLS")
	fs.IntVar(&c.EventsNATSReplicas, "events-nats-replicas", 0, "--events-nats: replicas of the events stream when the gateway makes it (0 = 3 on a NATS cluster, else 1)")
	fs.IntVar(&c.EventsNATSBacklog, "events-nats-backlog", node.DefaultEventsBacklog, "--events-nats: most events waiting while NATS is unreachable (a cluster shares it over its partitions); past it new events are not queued for NATS")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if err := applyEnv(fs); err != nil {
		return c, err
	}
	set := setFlags(fs)
	if !set["min-free-disk"] {
		c.MinFreeDisk = persist.MinFreeDiskFor(c.MemTableSize)
	}
	c.AdminUIDs, c.CORSOrigins = splitList(adminUIDs), splitList(corsOrigins)
	c.SecretKey = os.Getenv("GATEWAY_SECRET_KEY")
	var err error
	if c.InternalCIDRs, err = parseCIDRs(internalCIDRs); err != nil {
		return c, err
	}
	if err := c.Check(); err != nil {
		return c, err
	}
	switch {
	case c.LogFormat != "json" && c.LogFormat != "text":
		return c, errors.New("--log-format must be json or text")
	case c.MemTableSize < 1<<20 || c.MemTableSize > 1<<30:
		return c, errors.New("--memtable-size must be 1 MiB to 1 GiB")
	case c.Store == "badger" && c.MinFreeDisk != 0 && c.MinFreeDisk < persist.MinFreeDiskFor(c.MemTableSize):
		return c, fmt.Errorf("--min-free-disk %s is under the %s Badger may still write after writes stop with %s memtables (flushes and compactions, README: Operations): give at least that, or a smaller --memtable-size",
			humanBytes(c.MinFreeDisk), humanBytes(persist.MinFreeDiskFor(c.MemTableSize)), humanBytes(c.MemTableSize))
	}
	if c.SimURL != "" {
		for _, f := range []string{"sim-latency", "sim-autopair"} {
			if set[f] {
				return c, fmt.Errorf("--%s belongs to `gateway sim` when --sim-url is set (the sim process owns the network)", f)
			}
		}
	}
	if c.Cluster && c.NodeID == "" {
		c.NodeID = defaultNodeID(c.addr)
	}
	return c, nil
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

// defaultNodeID is <host name>:<port of --addr> (DESIGN.md section 13.1).
func defaultNodeID(addr string) string {
	host, _ := os.Hostname()
	port := addr
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		port = addr[i+1:]
	}
	if _, err := strconv.Atoi(port); err != nil || host == "" {
		return host + port
	}
	return host + ":" + port
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
