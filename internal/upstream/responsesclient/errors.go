package responsesclient

import "errors"

// RequestError is a Responses request that cannot be translated: the
// client's 400, naming Param.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// ErrBadResponse is a provider answer (in its chat form) that cannot be
// read: not JSON, or without what a response needs.
var ErrBadResponse = errors.New("provider answer cannot be translated")

// ProviderError is an error object a provider put in its chat stream.
type ProviderError struct{ Data []byte }

func (e *ProviderError) Error() string { return "provider error: " + string(e.Data) }
