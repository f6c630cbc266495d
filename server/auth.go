package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// AuthTokenFileName is the token file --generate-auth-token writes in the
// data directory.
const AuthTokenFileName = "auth-token"

// ErrAuthRequired is returned by Open for a listen address beyond loopback
// without a token: the API would serve anyone who can reach it.
var ErrAuthRequired = errors.New("an address beyond loopback needs an auth token")

// IsLoopback says whether the listen address host:port serves loopback
// only: 127.0.0.0/8, ::1, "localhost", or a host name every address of
// which is a loopback one (an error when the name does not resolve). An
// empty host (":7070") or an unspecified IP
// (0.0.0.0, [::]) serves every interface.
func IsLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w", listen, err)
	}
	switch {
	case host == "":
		return false, nil
	case strings.EqualFold(strings.TrimSuffix(host, "."), "localhost"):
		return true, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w", listen, err)
	}
	if len(ips) == 0 {
		return false, nil
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return true, nil
}

// checkAuthConfig refuses a listen address beyond loopback without a token,
// and a token file together with --generate-auth-token.
func checkAuthConfig(cfg Config) error {
	if cfg.AuthTokenFile != "" && cfg.GenerateAuthToken {
		return fmt.Errorf("--auth-token-file and --generate-auth-token: choose one")
	}
	loop, err := IsLoopback(cfg.Listen)
	if err != nil {
		return nil // listening on it fails, and says why
	}
	if !loop && cfg.AuthTokenFile == "" && !cfg.GenerateAuthToken {
		return fmt.Errorf("--listen %s serves beyond loopback, and without a token anyone who reaches it can run pipelines as this user: "+
			"start the server with --generate-auth-token (writes DATA_DIR/%s and prints the token once) or --auth-token-file FILE, "+
			"and give clients the token with --token-file or $WEIR_TOKEN; or listen on 127.0.0.1 (see docs/SECURITY.md): %w",
			cfg.Listen, AuthTokenFileName, ErrAuthRequired)
	}
	return nil
}

// ensureAuthToken returns dir's generated token file, creating it (0600,
// a random 256-bit token) when it does not exist; created says whether
// this call wrote it, and token is the new token then.
func ensureAuthToken(dir string) (path, token string, created bool, err error) {
	path = filepath.Join(dir, AuthTokenFileName)
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", false, fmt.Errorf("generating an auth token: %w", err)
	}
	token = hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", "", false, fmt.Errorf("tightening the auth token file: %w", err)
		}
		return path, "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("creating the auth token file: %w", err)
	}
	_, werr := f.WriteString(token + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return "", "", false, fmt.Errorf("writing the auth token file: %w", err)
	}
	return path, token, true, nil
}
