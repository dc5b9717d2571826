package actors

import "errors"

// The gateway's domain errors, in one place. The engine re-exports them for the HTTP layer, whose
// single mapping function turns each into a status and a stable code (DESIGN.md section 4).
// Callers wrap them with detail (fmt.Errorf("%w: ...")) and test with errors.Is.
var (
	// ErrUnknownKey: no API key has this value.
	ErrUnknownKey = errors.New("Invalid API key")
	// ErrKeyRevoked: the API key was revoked by an administrator.
	ErrKeyRevoked = errors.New("API key has been revoked")
	// ErrKeyExpired: the API key is past its expiresAt.
	ErrKeyExpired = errors.New("API key has expired")
	// ErrInsufficientScope: the API key lacks the scope the endpoint needs.
	ErrInsufficientScope = errors.New("API key lacks the required scope")
	// ErrRateLimited: the API key reached its daily request cap.
	ErrRateLimited = errors.New("daily request limit reached")
	// ErrQuotaExceeded: the account used its monthly message allowance.
	ErrQuotaExceeded = errors.New("monthly message allowance used up")
	// ErrUnavailable: a dependency (storage, an actor) did not answer in time; retry later.
	ErrUnavailable = errors.New("service temporarily unavailable")

	// ErrUserNotFound, ErrKeyNotFound, ErrSessionNotFound: no such record.
	ErrUserNotFound    = errors.New("user not found")
	ErrKeyNotFound     = errors.New("API key not found")
	ErrSessionNotFound = errors.New("session not found")
	// ErrAlreadyExists: a record with this id exists already.
	ErrAlreadyExists = errors.New("already exists")
	// ErrValidation: the input is well-formed but not acceptable.
	ErrValidation = errors.New("validation failed")
	// ErrForbidden: the caller may not act on this resource (another user's, or wrong role).
	ErrForbidden = errors.New("forbidden")

	// ErrStoreNotFound: no connected store matches (the user has none, or no store has this
	// shop domain).
	ErrStoreNotFound = errors.New("store not found")
	// ErrInvalidSignature: a store webhook's signature is missing or does not verify with the
	// store's secret, or the store has no secret and signatures are required.
	ErrInvalidSignature = errors.New("invalid webhook signature")
)
