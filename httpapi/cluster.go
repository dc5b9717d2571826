package httpapi

// A node of a cluster (DESIGN.md section 13): any node takes any request. The node that
// receives one authenticates it (and checks --internal-cidrs on the client's address), finds
// the partition its data lives on, and runs it there: here when this node owns the partition,
// else on the owner, over NATS (Cluster.Forward), whose answer goes back to the client as it
// is. The owner runs the forwarded request through the same routes, with the principal the
// receiving node established instead of the credentials (ServeForwarded).
//
// Which partition a request belongs to:
//   - API-key routes (/api/v1/*): the key's user's, found from the SHA-256 of the raw key
//     (Cluster.Locate: a cache kept current by a watch, no round trip once known);
//   - dashboard routes (ID token): the caller's own;
//   - admin routes that act on one user, key or session: that user's, key's or session's
//     (an admin's role is read from its profile's record wherever that lives);
//   - store webhooks and OAuth callbacks: the user their URL names (a webhook without one: its
//     shop's);
//   - the rest is answered by the receiving node itself: health, metrics, the documents, the
//     dashboard's files, admin lists (read from every partition's records), the cluster's
//     state and the user's live event stream (fed from NATS).
//
// Requests whose partition cannot be told (a key nobody holds, a malformed body) go to a
// partition chosen from what they carry, whose owner gives the answer a single node would
// (401, 404, 400).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// Cluster is what a node of a cluster gives the HTTP layer (package node's).
type Cluster interface {
	// PartitionOf is the partition of a user id (a session with no user: of its id).
	PartitionOf(id string) int
	// Enter lets a request of partition p run on this node: the partition's backend, and done
	// to call when the request has finished; ok false when another node owns p.
	Enter(p int) (b *Backend, done func(), ok bool)
	// Forward runs a request on partition p's owner (cluster.Node.Forward): cluster.ErrLocal
	// when p became this node's meanwhile; an error wrapping domain.ErrNodeUnavailable when
	// nobody answers.
	Forward(ctx context.Context, p int, env *cluster.Envelope) (*cluster.Response, error)
	// Locate finds the partition of a record named by something other than a user id: an API
	// key by the hex SHA-256 of the raw key (table "apikey_hash"), a key by id ("apikey"), a
	// session ("session"), a connected shop ("store"). ok false: no partition holds it.
	Locate(table, id string) (p int, ok bool, err error)
	// User reads a profile from its partition's records (false: none), with its effective
	// role (admin when in --admin-uids).
	User(uid string) (domain.User, bool, error)
	// Records reads every partition's records, for the admin lists.
	Records() ClusterRecords
	// Snapshot is GET /api/admin/cluster's body; NodeID names this node.
	Snapshot() cluster.Snapshot
	NodeID() string
	// Listen opens a stream of uid's events, published by whichever node owns uid; Replay
	// calls fn with uid's events after lastID from the journal in uid's partition's records
	// (engine.ReplayJournal: found is false when it does not hold lastID).
	Listen(uid string) *engine.Listener
	Replay(uid, lastID string, fn func(engine.LiveEvent) error) (found bool, err error)
}

// ClusterRecords are the admin lists of a cluster, read from every partition's records: the
// profiles by id, the keys and sessions as the engine lists them (a key's api_calls is its
// stored high-water mark, which runs ahead of the live count by at most a reservation block;
// a session's status is its last stored one).
type ClusterRecords interface {
	Users() ([]domain.User, error)
	Keys() ([]engine.KeyView, error)
	Sessions() ([]engine.SessionView, error)
}

// Backend is what a request runs on: the engine and the events facet of the request's
// partition (a single node: the Config's).
type Backend struct {
	Engine    *engine.Engine
	Webhooks  WebhookService
	Partition int
}

// principal is who the receiving node authenticated, as the owner of the partition takes it.
type principal struct {
	// Kind: "user" (an ID token: the owner signs the user in, creating the profile), "admin"
	// (an admin acting on another partition: User is the admin's resolved profile), "key" (an
	// API key: the owner checks it in full, status, scopes and counters), "internal" (a caller
	// inside --internal-cidrs), "" (a public route).
	Kind        string       `json:"kind,omitempty"`
	UID         string       `json:"uid,omitempty"`
	Name        string       `json:"name,omitempty"`
	Email       string       `json:"email,omitempty"`
	ClaimsAdmin bool         `json:"claimsAdmin,omitempty"`
	User        *domain.User `json:"user,omitempty"`
	Internal    bool         `json:"internal,omitempty"`
	// SessionID: a session created with no user gets its id here, so its partition is known
	// before it exists.
	SessionID string `json:"sessionId,omitempty"`
}

// User-value keys of a request run for a cluster.
const (
	ctxPrincipal = "cluster_principal"
	ctxBackend   = "cluster_backend"
	ctxForwarded = "cluster_forwarded" // the forwarding's context (reqContext)
	ctxNotRun    = "cluster_not_run"   // a forwarded request stored nothing (notRun): run it again
)

// engine is the engine a request runs on: its partition's in a cluster.
func (s *Server) engine(ctx *fasthttp.RequestCtx) *engine.Engine {
	if b, ok := ctx.UserValue(ctxBackend).(*Backend); ok {
		return b.Engine
	}
	return s.eng
}

// webhooks is the events facet a request runs on.
func (s *Server) webhooks(ctx *fasthttp.RequestCtx) WebhookService {
	if b, ok := ctx.UserValue(ctxBackend).(*Backend); ok {
		return b.Webhooks
	}
	return s.cfg.Webhooks
}

func principalOf(ctx *fasthttp.RequestCtx) *principal {
	p, _ := ctx.UserValue(ctxPrincipal).(*principal)
	return p
}

// resolver finds the partition of a request, authenticating it where the route needs it.
type resolver func(s *Server, ctx *fasthttp.RequestCtx) (p int, who *principal, err error)

// partitionOf is how a cluster node finds the partition a route's request runs on; every
// route declares one beside it in routes.go. The node that receives a request finds the
// partition (authenticating the caller where the route needs it), then runs the request on
// that partition's runtime: here, or on its owner. A single node ignores it.
type partitionOf struct {
	name string   // as routes.go names it
	find resolver // nil: the receiving node answers
}

// The partitions routes declare.
var (
	// here: the receiving node answers; the route needs no partition's engine (health,
	// metrics, the API document and the dashboard's files, the admin lists read from every
	// partition, the cluster's state, live events from NATS, the sim's dev routes).
	here = &partitionOf{name: "here"}
	// byKey: the partition of the API key's user.
	byKey = &partitionOf{"byKey", apiKeyCaller}
	// byCaller: the signed-in caller's own partition.
	byCaller = &partitionOf{"byCaller", signedInCaller}
	// byCheckedKey: the partition of the key a validation checks.
	byCheckedKey = &partitionOf{"byCheckedKey", validateKey}
	// byStoreWebhook: a store webhook's user (?uid=), else its shop's.
	byStoreWebhook = &partitionOf{"byStoreWebhook", storeWebhook}
	// byOAuthState: the user an OAuth callback's state names.
	byOAuthState = &partitionOf{"byOAuthState", oauthCallback}
)

// adminActsOn: an admin (ID token, role admin) acting on t's partition.
func adminActsOn(t target) *partitionOf { return &partitionOf{"adminActsOn", adminOn(t)} }

// internalActsOn: a caller inside --internal-cidrs, or an admin, acting on t's partition.
func internalActsOn(t target) *partitionOf { return &partitionOf{"internalActsOn", internalOn(t)} }

// clustered makes h a route of a cluster node: resolved, then run here or on the owner.
func (s *Server) clustered(method, path string, part *partitionOf, h handler) handler {
	if s.cfg.Cluster == nil || part.find == nil {
		return h
	}
	find := part.find
	return func(ctx *fasthttp.RequestCtx) error {
		if b, forwarded := ctx.UserValue(ctxBackend).(*Backend); forwarded {
			err := s.settled(b, h(ctx)) // run here for the node that received it
			if notRun(err) {
				ctx.SetUserValue(ctxNotRun, true) // that node runs it again on the new owner
			}
			return err
		}
		p, who, err := find(s, ctx)
		if err != nil {
			return err
		}
		return s.runOn(ctx, p, who, method+" "+path, h)
	}
}

// runOn runs h on partition p: here, or on its owner. A run the partition's loss stopped
// before it stored anything (notRun) is run again on the partition's next owner (Forward holds
// it while there is none, cluster.HoldMax): a client sees latency, not a 503 (DESIGN.md
// section 19).
func (s *Server) runOn(ctx *fasthttp.RequestCtx, p int, who *principal, route string, h handler) error {
	cl := s.cfg.Cluster
	began := time.Now()
	for {
		if b, done, ok := cl.Enter(p); ok {
			ctx.SetUserValue(ctxBackend, b)
			ctx.SetUserValue(ctxPrincipal, who)
			err := s.settled(b, h(ctx))
			done()
			// Held at most HoldMax after each such failure (a run may itself have waited for
			// the store), 3 × HoldMax in all.
			if notRun(err) && time.Since(began) < 3*cluster.HoldMax {
				ctx.Response.Reset()
				ctx.SetUserValue(ctxBackend, nil)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return err
		}
		resp, err := cl.Forward(s.reqContext(ctx), p, s.envelope(ctx, route, who))
		if errors.Is(err, cluster.ErrLocal) {
			continue
		}
		if err != nil {
			return err
		}
		ctx.SetStatusCode(resp.Status)
		for _, h := range resp.Header {
			ctx.Response.Header.Add(h.Name, h.Value)
		}
		ctx.Response.SetBodyRaw(resp.Body)
		return nil
	}
}

// errLeft marks a request's unexpected error while its partition left this node: it may have
// stored part of what it did, so it is not run again.
var errLeft = errors.New("partition left this node while the request ran")

// notRun tells whether a request's error says it stored nothing because its partition was no
// longer this node's to write (the store refused before sending, or the server refused on the
// partition's fence), so it may run again on the partition's next owner.
func notRun(err error) bool {
	if err == nil || errors.Is(err, errLeft) {
		return false
	}
	return nodeUnavailable(err) // a partition's store refusing because the partition left
}

// nodeUnavailable tells whether err is domain.ErrNodeUnavailable: the core reports a failed
// write as unavailable and keeps the storage's error only as text (%v), so its text counts too.
func nodeUnavailable(err error) bool {
	return errors.Is(err, domain.ErrNodeUnavailable) || strings.Contains(err.Error(), domain.ErrNodeUnavailable.Msg)
}

// settled is a request's error as the client gets it: one the gateway did not expect (a 500)
// while the partition left this node under the request (fenced: the lease could not be
// renewed, its actors stopped) is that, 503 node_unavailable, to retry.
func (s *Server) settled(b *Backend, err error) error {
	if err == nil {
		return nil
	}
	if status, _ := statusOf(err); status != fasthttp.StatusInternalServerError {
		return err
	}
	if now, done, ok := s.cfg.Cluster.Enter(b.Partition); ok {
		done()
		if now == b {
			return err
		}
	}
	return fmt.Errorf("%w: partition %d: %w: %v", domain.ErrNodeUnavailable, b.Partition, errLeft, err)
}

// hopHeaders are not forwarded either way.
var hopHeaders = map[string]bool{"Connection": true, "Content-Length": true, "Transfer-Encoding": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true, "Date": true, "Server": true}

// envelope is the request as the owner needs it. Its wait is the route's longest: a send's
// ?wait=, a synchronous bulk send's whole campaign (the write timeout), else the engine's
// longest ask (a session's network answers).
func (s *Server) envelope(ctx *fasthttp.RequestCtx, route string, who *principal) *cluster.Envelope {
	env := &cluster.Envelope{Route: route, Method: string(ctx.Method()), Path: string(ctx.Path()),
		Query: string(ctx.QueryArgs().QueryString()), Remote: ctx.RemoteIP().String(), Body: ctx.Request.Body(),
		Wait: 25 * time.Second}
	if who != nil {
		env.Principal, _ = json.Marshal(who)
	}
	if w, err := waitOf(ctx, 0); err == nil && w > 0 {
		env.Wait += w
	}
	if route == "POST /api/v1/messages/send-bulk" {
		var b struct {
			Async bool `json:"async"`
		}
		if json.Unmarshal(ctx.PostBody(), &b) != nil || !b.Async {
			env.Wait = s.cfg.WriteTimeout // a synchronous campaign answers when it is done
		}
	}
	for k, v := range ctx.Request.Header.All() {
		if name := string(k); !hopHeaders[name] {
			env.Header = append(env.Header, cluster.Header{Name: name, Value: string(v)})
		}
	}
	if clientRequestID(ctx) == nil { // a caller's own id is among the headers above
		env.Header = append(env.Header, cluster.Header{Name: requestIDHeader, Value: s.requestID(ctx)})
	}
	return env
}

// ServeForwarded answers a request another node forwarded here, on b (the partition's), with
// the principal that node authenticated. It always answers (an error is an answer too).
func (s *Server) ServeForwarded(ctx context.Context, b *Backend, env *cluster.Envelope) *cluster.Response {
	var who principal
	if len(env.Principal) > 0 {
		if err := json.Unmarshal(env.Principal, &who); err != nil {
			return &cluster.Response{Status: fasthttp.StatusBadRequest}
		}
	}
	var req fasthttp.Request
	req.Header.SetMethod(env.Method)
	uri := env.Path
	if env.Query != "" {
		uri += "?" + env.Query
	}
	req.SetRequestURI(uri)
	for _, h := range env.Header {
		if h.Name == "X-Request-Id" {
			req.Header.Set(h.Name, h.Value) // the receiving node's, once
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	req.SetBodyRaw(env.Body)
	var rc fasthttp.RequestCtx
	addr := &net.TCPAddr{IP: net.ParseIP(env.Remote)}
	rc.Init(&req, addr, nil)
	rc.SetUserValue(ctxBackend, b)
	rc.SetUserValue(ctxPrincipal, &who)
	rc.SetUserValue(ctxForwarded, ctx)
	s.router.Handler(&rc)
	resp := &cluster.Response{Status: rc.Response.StatusCode(), Body: append([]byte(nil), rc.Response.Body()...)}
	resp.NotRun, _ = rc.UserValue(ctxNotRun).(bool)
	for k, v := range rc.Response.Header.All() {
		if name := string(k); !hopHeaders[name] {
			resp.Header = append(resp.Header, cluster.Header{Name: name, Value: string(v)})
		}
	}
	return resp
}

// signedInCaller: the caller's own partition.
func signedInCaller(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	if len(ctx.Request.Header.Peek("Authorization")) == 0 && string(ctx.Path()) == "/api/client/events/stream" {
		return 0, nil, errNoCredentials
	}
	c, err := s.verify(ctx)
	if err != nil {
		return 0, nil, err
	}
	who := &principal{Kind: "user", UID: c.UID, Name: c.Name, Email: c.Email, ClaimsAdmin: s.cfg.DevRoles && c.Role == engine.RoleAdmin}
	return s.cfg.Cluster.PartitionOf(c.UID), who, nil
}

// apiKeyCaller: the partition of the key's user. A request without a key, or with one no
// partition holds, goes to the partition its hash falls in, whose owner refuses it as a
// single node would.
func apiKeyCaller(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	raw := s.rawKey(ctx)
	if len(raw) == 0 {
		s.metrics.keyDecision("missing")
		return 0, nil, errNoCredentials
	}
	p, err := s.keyPartition(raw)
	return p, &principal{Kind: "key"}, err
}

// keyPartition is the partition of the key whose raw bytes are raw, found by the hex SHA-256 of
// the key, encoded in this frame: one allocation (the id's string), not hex.EncodeToString's
// two.
func (s *Server) keyPartition(raw []byte) (int, error) {
	sum := sha256.Sum256(raw)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return s.recordPartition("apikey_hash", string(h[:]))
}

// recordPartition is the partition that holds id in table, or, when none does, the one id
// falls in (whose owner answers as a single node would).
func (s *Server) recordPartition(table, id string) (int, error) {
	p, ok, err := s.cfg.Cluster.Locate(table, id)
	if err != nil {
		return 0, err
	}
	if !ok {
		p = s.cfg.Cluster.PartitionOf(id)
	}
	return p, nil
}

// validateKey: the partition of the key it checks (public, rate-limited by the owner).
func validateKey(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	var req validateRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.RawKey == nil {
		return s.cfg.Cluster.PartitionOf(ctx.RemoteIP().String()), nil, nil
	}
	p, err := s.keyPartition([]byte(*req.RawKey))
	return p, nil, err
}

// storeWebhook: the user its URL names (?uid=), else its shop's.
func storeWebhook(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	args := ctx.QueryArgs()
	if uid := string(args.Peek("uid")); uid != "" {
		return s.cfg.Cluster.PartitionOf(uid), nil, nil
	}
	w := engine.Webhook{Shop: args.Peek("shop"), Header: &ctx.Request.Header}
	p, err := s.recordPartition("store", strings.ToLower(string(w.ClaimedShop())))
	return p, nil, err
}

// oauthCallback: the user its state names (<uid>___<nonce>).
func oauthCallback(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	state := string(ctx.QueryArgs().Peek("state"))
	if i := strings.LastIndex(state, "___"); i > 0 {
		return s.cfg.Cluster.PartitionOf(state[:i]), nil, nil
	}
	return s.cfg.Cluster.PartitionOf(state), nil, nil
}

// target finds the partition an admin route acts on; ok false: it cannot tell (the owner of
// the caller's partition answers, as a single node would).
type target func(s *Server, ctx *fasthttp.RequestCtx) (p int, ok bool, err error)

func bodyField(ctx *fasthttp.RequestCtx, field string) string {
	var m map[string]any
	if json.Unmarshal(ctx.PostBody(), &m) != nil {
		return ""
	}
	v, _ := m[field].(string)
	return strings.TrimSpace(v)
}

// bodyUser: the user a body field names.
func bodyUser(field string) target {
	return func(s *Server, ctx *fasthttp.RequestCtx) (int, bool, error) {
		uid := bodyField(ctx, field)
		return s.cfg.Cluster.PartitionOf(uid), uid != "", nil
	}
}

// bodyRecord and queryRecord: the record (key, session) a body field or query names.
func bodyRecord(field, table string) target {
	return func(s *Server, ctx *fasthttp.RequestCtx) (int, bool, error) {
		return locate(s, table, bodyField(ctx, field))
	}
}

func queryRecord(arg, table string) target {
	return func(s *Server, ctx *fasthttp.RequestCtx) (int, bool, error) {
		return locate(s, table, string(ctx.QueryArgs().Peek(arg)))
	}
}

func locate(s *Server, table, id string) (int, bool, error) {
	if id == "" {
		return 0, false, nil
	}
	return s.cfg.Cluster.Locate(table, id)
}

// newSession: a session created for a user lives on the user's partition; one with no user
// gets its id here and lives on that id's.
func newSession(s *Server, ctx *fasthttp.RequestCtx) (int, bool, error) {
	if uid := bodyField(ctx, "assignToUserId"); uid != "" {
		return s.cfg.Cluster.PartitionOf(uid), true, nil
	}
	return 0, false, nil
}

// adminOn: an admin (ID token, role admin) acting on t's partition.
func adminOn(t target) resolver {
	return func(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
		u, err := s.clusterAdmin(ctx)
		if err != nil {
			return 0, nil, err
		}
		p, ok, err := t(s, ctx)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			p = s.cfg.Cluster.PartitionOf(u.ID)
		}
		return p, &principal{Kind: "admin", User: &u}, nil
	}
}

// internalOn: a caller inside --internal-cidrs, or an admin, acting on t's partition; a
// session created with no user gets its id (and so its partition) here.
func internalOn(t target) resolver {
	return func(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
		who := &principal{Kind: "internal", Internal: true}
		fallback := ctx.RemoteIP().String()
		if !s.isInternal(ctx) {
			if len(bearer(ctx)) == 0 {
				return 0, nil, errInternalOnly
			}
			u, err := s.clusterAdmin(ctx)
			if errors.Is(err, errNotAdmin) {
				return 0, nil, errInternalOnly
			}
			if err != nil {
				return 0, nil, err
			}
			fallback = u.ID
		}
		p, ok, err := t(s, ctx)
		switch {
		case err != nil:
			return 0, nil, err
		case ok:
		case string(ctx.Path()) == "/api/admin/sessions/create":
			who.SessionID = uuid.NewString()
			p = s.cfg.Cluster.PartitionOf(who.SessionID)
		default:
			p = s.cfg.Cluster.PartitionOf(fallback)
		}
		return p, who, nil
	}
}

// clusterAdmin authenticates an admin at the receiving node (clusterUser, role admin).
func (s *Server) clusterAdmin(ctx *fasthttp.RequestCtx) (domain.User, error) {
	u, err := s.clusterUser(ctx)
	if err == nil && u.Role != engine.RoleAdmin {
		err = errNotAdmin
	}
	return u, err
}

// clusterUser authenticates the caller at the receiving node, for a route it answers itself or
// before it knows the request's partition: the profile is read from the caller's partition
// (this node's engine when it owns it, which signs a first caller in; else the records), with
// the effective role (the token's in dev auth, --admin-uids, or a promoted profile).
func (s *Server) clusterUser(ctx *fasthttp.RequestCtx) (domain.User, error) {
	c, err := s.verify(ctx)
	if err != nil {
		return domain.User{}, err
	}
	p := engine.Principal{UID: c.UID, Name: c.Name, Email: c.Email, ClaimsAdmin: s.cfg.DevRoles && c.Role == engine.RoleAdmin}
	if b, done, ok := s.cfg.Cluster.Enter(s.cfg.Cluster.PartitionOf(c.UID)); ok {
		defer done()
		local := &fasthttp.RequestCtx{}
		local.SetUserValue(ctxBackend, b)
		return s.signIn(local, p)
	}
	u, found, err := s.cfg.Cluster.User(c.UID)
	if err != nil {
		return u, err
	}
	if !found {
		if err := engine.CheckUserID(c.UID); err != nil {
			return u, fmt.Errorf("%w: %v", errUnsupportedSubject, err)
		}
		u = domain.User{ID: c.UID, Name: c.Name, Email: c.Email, Role: engine.RoleClient}
	}
	if p.ClaimsAdmin {
		u.Role = engine.RoleAdmin
	}
	return u, nil
}
