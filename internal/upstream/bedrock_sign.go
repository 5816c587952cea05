package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// BedrockService is the SigV4 signing name of the Bedrock Runtime API.
const BedrockService = "bedrock"

// AWSSigner signs a format bedrock provider's requests with SigV4: the
// signing and the credential chain are aws-sdk-go-v2's, never the
// gateway's own. Built once per routes load and shared by the provider's
// attempts, so cached credentials (a role's, renewed before they expire)
// serve them all.
type AWSSigner struct {
	Region string
	signer *v4.Signer
	// load resolves the credentials provider: the routes file's static
	// keys at once, else the standard chain on first use.
	load func(ctx context.Context) (aws.CredentialsProvider, error)
	// loading is held (a one-slot semaphore) by the attempt that loads
	// the chain; the others wait for it, or for their own context.
	loading chan struct{}
	creds   atomic.Pointer[aws.CredentialsProvider] // nil until load succeeded
	now     func() time.Time
	// Static: the routes file's keys, rather than the standard chain.
	Static bool
}

// NewAWSSigner returns the signer of a provider in region. With an
// access key id, the static keys are used (sessionToken may be ""); without
// one, the standard AWS chain (environment, shared config and credential
// files, web identity, container and instance roles) is loaded lazily, at
// the first attempt, so a gateway whose chain is not reachable at start
// still starts and serves its other providers.
func NewAWSSigner(region, accessKeyID, secretAccessKey, sessionToken string) *AWSSigner {
	s := &AWSSigner{Region: region, signer: v4.NewSigner(), now: time.Now, loading: make(chan struct{}, 1)}
	if accessKeyID != "" {
		s.Static = true
		p := credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, sessionToken)
		s.load = func(context.Context) (aws.CredentialsProvider, error) { return p, nil }
	} else {
		s.load = func(ctx context.Context) (aws.CredentialsProvider, error) {
			cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
			if err != nil {
				return nil, err
			}
			if cfg.Credentials == nil {
				return nil, errors.New("the AWS credential chain found no credentials")
			}
			return cfg.Credentials, nil // a CredentialsCache: renewed before expiry
		}
	}
	return s
}

// provider returns the credentials provider, loading it on first use. A
// failed load is tried again by the next attempt.
func (s *AWSSigner) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	if p := s.creds.Load(); p != nil {
		return *p, nil
	}
	select {
	case s.loading <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.loading }()
	if p := s.creds.Load(); p != nil {
		return *p, nil // loaded while this attempt waited
	}
	p, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	s.creds.Store(&p)
	return p, nil
}

// Sign adds SigV4's Authorization, X-Amz-Date and (with a session token)
// X-Amz-Security-Token to req for body. Every header on req is signed, so
// it runs after the last one was set. An error is the credentials' (none
// found, a role that cannot be assumed): nothing was sent. It returns the
// credentials signed with, for Redact.
func (s *AWSSigner) Sign(ctx context.Context, req *http.Request, body []byte) (aws.Credentials, error) {
	p, err := s.provider(ctx)
	if err != nil {
		return aws.Credentials{}, err
	}
	c, err := p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, err
	}
	sum := sha256.Sum256(body)
	// A header the transport will not send (a nil value: Idempotency-Key,
	// which only marks the request replayable) must not be signed, or the
	// provider's canonical request would differ from the signed one.
	var hidden []string
	for k, vv := range req.Header {
		if vv == nil {
			hidden = append(hidden, k)
			delete(req.Header, k)
		}
	}
	err = s.signer.SignHTTP(ctx, c, req, hex.EncodeToString(sum[:]), BedrockService, s.Region, s.now().UTC())
	for _, k := range hidden {
		req.Header[k] = nil
	}
	return c, err
}

// redactAWS removes c's values from a provider's error body. AWS's
// signature errors quote the canonical request they expected, signed
// headers and all, so a 403 may hold the session token; credentials from
// the chain (a role's) are not among the configured secrets the gateway's
// redactor knows, so they are removed here, where they are known.
func redactAWS(body []byte, c aws.Credentials) []byte {
	for _, v := range []string{c.SessionToken, c.SecretAccessKey, c.AccessKeyID} {
		if len(v) >= 8 && bytes.Contains(body, []byte(v)) {
			body = bytes.ReplaceAll(body, []byte(v), []byte("REDACTED"))
		}
	}
	return body
}
