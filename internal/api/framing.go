package api

import "net/http"

// closeChunked closes the connection after a chunked HTTP/1.x request. A
// request that carries both Content-Length and Transfer-Encoding: chunked
// may be read differently by a proxy in front of the gateway, and the bytes
// after the chunked terminator would run here as a second request (request
// smuggling); RFC 9112 section 6.1 says the server must close the
// connection after answering it. net/http reads the body as chunked but
// deletes the Content-Length before any handler runs, so the two framings
// cannot be told apart here: every chunked request closes its connection
// after its answer (net/http closes after a response that says
// Connection: close). JSON clients send a Content-Length; one that streams
// its body pays a new connection per request.
func closeChunked(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 && r.ProtoMajor == 1 {
		w.Header()["Connection"] = connectionClose
	}
}

// connectionClose is shared like nosniffValue.
var connectionClose = []string{"close"}
