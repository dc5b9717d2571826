package actors

import "github.com/gateway/gateway/domain"

// The gateway's domain errors are declared in domain (each with its stable code); these names
// stay for the actors' callers.
var (
	ErrUnknownKey        = domain.ErrUnknownKey
	ErrKeyRevoked        = domain.ErrKeyRevoked
	ErrKeyExpired        = domain.ErrKeyExpired
	ErrInsufficientScope = domain.ErrInsufficientScope
	ErrRateLimited       = domain.ErrRateLimited
	ErrQuotaExceeded     = domain.ErrQuotaExceeded
	ErrUnavailable       = domain.ErrUnavailable
	ErrUserNotFound      = domain.ErrUserNotFound
	ErrKeyNotFound       = domain.ErrKeyNotFound
	ErrSessionNotFound   = domain.ErrSessionNotFound
	ErrAlreadyExists     = domain.ErrAlreadyExists
	ErrValidation        = domain.ErrValidation
	ErrForbidden         = domain.ErrForbidden
	ErrStoreNotFound     = domain.ErrStoreNotFound
	ErrInvalidSignature  = domain.ErrInvalidSignature
	ErrAlreadyConnected  = domain.ErrAlreadyConnected
	ErrNotConnected      = domain.ErrNotConnected
)
