// Package errs holds the errors the public API names (baton.ErrConfig,
// baton.ErrBrokers, baton.ErrAuth), so that the runtime's packages can
// return them without importing the root package, which exports them
// under those names.
package errs

import "errors"

var (
	// ErrConfig: an option or the topology is invalid.
	ErrConfig = errors.New("baton: invalid configuration")
	// ErrBrokers: no broker answered in time.
	ErrBrokers = errors.New("baton: brokers unreachable")
	// ErrAuth: the brokers refused the credentials.
	ErrAuth = errors.New("baton: authentication with the brokers failed")
)
