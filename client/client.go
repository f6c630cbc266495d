package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
)

// DefaultServer is the address the CLI talks to when neither --server nor
// WEIR_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:7070"

// MaxRequestBytes is the largest request body a server accepts (a
// pipeline's YAML text travels in it); a larger one is refused with
// REQUEST_TOO_LARGE.
const MaxRequestBytes = 8 << 20

// ErrUnreachable is returned when no weir server answers at the client's
// address: start one (`weir server`) or point the client at it.
var ErrUnreachable = errors.New("weir server unreachable")

// Error is an error reply of the API: its HTTP status, stable code and message.
type Error struct {
	Status  int
	Code    errcode.Code
	Message string
}

// Error returns the server's message.
func (e *Error) Error() string { return e.Message }

// Client calls a weir server's API. It is safe for concurrent use.
type Client struct {
	base  string
	http  *http.Client
	token string // sent as Authorization: Bearer when not ""
}

// WithToken returns a copy of c that sends token as its bearer token
// (Authorization: Bearer TOKEN) with every request.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// NewClient returns a client of the server at addr (http://host:port, or
// host:port). hc nil means a client with a 30s timeout.
func NewClient(addr string, hc *http.Client) (*Client, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("server address %q is not an http(s)://host:port URL", addr)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), http: hc}, nil
}

// Base returns the server's base URL.
func (c *Client) Base() string { return c.base }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	status, b, err := c.roundTrip(ctx, method, path, in)
	if err != nil {
		return err
	}
	if status >= 300 {
		return replyError(method, path, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decoding the reply of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// doWithReply is do for requests whose refusals carry a reply as well (the
// report of an update or a release): on an error status it returns the
// *Error, and replied says whether the body also decoded into out.
func (c *Client) doWithReply(ctx context.Context, method, path string, in, out any) (replied bool, err error) {
	status, b, err := c.roundTrip(ctx, method, path, in)
	if err != nil {
		return false, err
	}
	if status >= 300 {
		return json.Unmarshal(b, out) == nil, replyError(method, path, status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return false, fmt.Errorf("decoding the reply of %s %s: %w", method, path, err)
	}
	return true, nil
}

// roundTrip sends in (JSON, unless nil) and returns the reply's status and body.
func (c *Client) roundTrip(ctx context.Context, method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, nil, fmt.Errorf("building the request: %w", err)
	}
	switch {
	case in != nil, method == http.MethodPost, method == http.MethodPut, method == http.MethodPatch, method == http.MethodDelete:
		// A state-changing request is JSON even without a body (the
		// server refuses any other: see docs/SECURITY.md).
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the reply of %s %s: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// authorize adds the client's bearer token to req.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// transportError words a request that got no reply: the context's end, a
// TLS failure, or ErrUnreachable.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if terr := tlsError(c.base, err); terr != nil {
		return terr
	}
	return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
}

// replyError is the *Error of a reply with an error status: the code and
// message of its error body, or INTERNAL with the body when it has none.
func replyError(method, path string, status int, b []byte) *Error {
	var eb ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code == "" {
		return &Error{Status: status, Code: errcode.Internal, Message: fmt.Sprintf("%s %s: HTTP %d: %s", method, path, status, strings.TrimSpace(string(b)))}
	}
	return &Error{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
}

// ErrorBody is the body of every error reply.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a stable code and a message for the user.
type ErrorDetail struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
}

// Healthy returns nil when the server answers its health check.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// ErrTLS marks a failed TLS handshake with the server: its certificate is
// not trusted (give its CA with --tls-ca or $WEIR_TLS_CA), or one side does
// not speak TLS (check the address's scheme).
var ErrTLS = errors.New("TLS handshake with the weir server failed")

// tlsError words err when it is a TLS failure, nil otherwise.
func tlsError(base string, err error) error {
	var verr *tls.CertificateVerificationError
	var rerr tls.RecordHeaderError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%w: the certificate of %s is not trusted (%v); give the CA that signed it with --tls-ca or $%s", ErrTLS, base, verr.Err, TLSCAEnv)
	case errors.As(err, &rerr):
		return fmt.Errorf("%w: %s does not answer TLS; if it serves plain HTTP, use an http:// address", ErrTLS, base)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w: %s serves plain HTTP; use an http:// address", ErrTLS, base)
	}
	return nil
}

// TLSCAEnv is the environment variable clients read their private CA file
// from when --tls-ca is not given.
const TLSCAEnv = "WEIR_TLS_CA"

// NewHTTPClient returns the HTTP client of a weir API client: timeout
// bounds each request (0: none); caFile, when not "", holds the PEM
// certificates of the only authorities trusted for https addresses (a
// private CA), else the system's roots are. Certificates are always
// verified, and TLS 1.2 is the oldest version offered.
func NewHTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Timeout: timeout, Transport: tr}, nil
}

// ClientCAFile returns the CA file a client trusts: caFile (--tls-ca),
// else $WEIR_TLS_CA; "" trusts the system's roots.
func ClientCAFile(caFile string) string {
	if caFile != "" {
		return caFile
	}
	return strings.TrimSpace(os.Getenv(TLSCAEnv))
}

// TokenEnv is the environment variable clients read their token from when
// no flag gives one.
const TokenEnv = "WEIR_TOKEN"

// ClientToken returns the bearer token a client sends, in the CLI's order:
// token (--token), else the first token of tokenFile (--token-file), else
// $WEIR_TOKEN. found says whether one of the three gave a token.
func ClientToken(token, tokenFile string) (tok string, found bool, err error) {
	switch {
	case strings.TrimSpace(token) != "":
		return strings.TrimSpace(token), true, nil
	case tokenFile != "":
		tok, err := ReadToken(tokenFile)
		if err != nil {
			return "", false, fmt.Errorf("--token-file: %w", err)
		}
		return tok, true, nil
	}
	tok = strings.TrimSpace(os.Getenv(TokenEnv))
	return tok, tok != "", nil
}

// ErrNoToken is returned by ReadToken when no token is configured.
var ErrNoToken = errors.New("no auth token")

// ReadToken returns the first token of a token file: one token a line,
// blank lines and lines starting with # ignored (the server's
// --auth-token-file format).
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the token file: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("token file %s: %w", path, ErrNoToken)
}
