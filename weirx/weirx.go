package weirx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/sandbox"
	"github.com/weir-dev/weir/server"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// Exit codes of a program, the same as the weir CLI's.
const (
	// ExitOK: the job ended (DONE, DRAINED, CANCELLED), the process was
	// stopped by SIGTERM or SIGINT (its job resumes at the next start), it
	// released its data directory to a new build, or a validation passed.
	ExitOK = 0
	// ExitFailure: the job failed, the data directory is held by another
	// process (without --update), the job runs another graph (without
	// --update), or the process could not start.
	ExitFailure = 1
	// ExitUsage: a bad flag or flag value, or an invalid job name.
	ExitUsage = 2
	// ExitInvalidPipeline: the build function failed or built an invalid
	// pipeline.
	ExitInvalidPipeline = 3
	// ExitIncompatible: --update refused by the compatibility check (the
	// report says why; the running job is untouched).
	ExitIncompatible = 6
)

// TakeoverTimeout bounds how long a build started with --update waits for
// the running process to checkpoint its jobs and release the data
// directory.
const TakeoverTimeout = 2 * time.Minute

// ExitError is an error that carries the process's exit code.
type ExitError struct {
	Code int
	Err  error
}

// Error returns the message.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// ExitCode returns the exit code of Run's error: ExitOK for nil, the code
// an *ExitError carries, ExitFailure otherwise.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	}
	return ExitFailure
}

// Main runs the program with the command line's arguments (see Run) and
// exits with its exit code; errors are printed to stderr.
func Main(build func(p *weir.Pipeline) error) {
	err := Run(context.Background(), os.Args[1:], os.Stdout, build)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
	}
	os.Exit(ExitCode(err))
}

// flags are the command line of a program; the names are weir run's and
// weir server's.
type flags struct {
	jobName            string
	dataDir            string
	listen             string
	update             bool
	mapping            string
	allowSourceChange  bool
	validateOnly       bool
	numWorkers         int
	maxNumWorkers      int
	checkpointInterval time.Duration
	natsURL            string
	nats               server.NATSCredentials
	format             string
	logLevel           string
	authTokenFile      string
	generateAuthToken  bool
	authExempt         []string
	allowedHosts       []string
	token              string
	tokenFile          string
	fromSnapshot       string
	pubsubGRPCListen   string
	pubsubProject      string
	fileRoots          []string
	allowedSQLHosts    []string
	tlsCert, tlsKey    string
	tlsCA              string
	// traceMemory and traceDir are --rehearse-trace-memory and
	// --rehearse-trace-dir as given; traceBytes is the parsed budget.
	traceMemory, traceDir string
	traceBytes            int64
}

func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := pflag.NewFlagSet("program", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.jobName, "job-name", "", "the job name (required): lower-case letters, digits and '-'")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory of the job registry, state and checkpoints (default ./JOB_NAME-data, so that a program never shares a weir server's ./weir-data)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "address of the HTTP API (port 0: chosen by the system, printed on the first line)")
	fs.StringVar(&f.fromSnapshot, "create-from-snapshot", "", "start a new job of --job-name from this READY snapshot of a Go program's job (after the compatibility check; no job of the name may be active)")
	fs.BoolVar(&f.update, "update", false, "replace the running job of --job-name with this build (after the compatibility check)")
	fs.StringVar(&f.mapping, "transform-name-mapping", "", `with --update: JSON object mapping old step names (prefixes) to new ones, e.g. '{"Old":"New"}'; "" deletes a step's state`)
	fs.BoolVar(&f.allowSourceChange, "allow-source-change", false, "with --update: accept a source that reads something else (its old positions are dropped)")
	fs.BoolVar(&f.validateOnly, "validate-only", false, "build and validate the pipeline (with --update: print the compatibility report) and change nothing")
	fs.IntVar(&f.numWorkers, "num-workers", 1, "number of workers of a new job")
	fs.IntVar(&f.maxNumWorkers, "max-num-workers", 0, "largest number of workers of a new job (recorded)")
	fs.DurationVar(&f.checkpointInterval, "checkpoint-interval", service.DefaultCheckpointInterval, "how often the job takes a checkpoint")
	fs.StringVar(&f.natsURL, "nats-url", "", "URL of an external NATS JetStream server to use instead of the embedded broker (nats://user:pass@host:4222 for a password; tls:// for TLS)")
	fs.StringVar(&f.nats.CredsFile, "nats-creds", "", "with --nats-url: NATS .creds file (user JWT and NKEY seed) to authenticate with")
	fs.StringVar(&f.nats.NKeyFile, "nats-nkey", "", "with --nats-url: file holding an NKEY user seed to authenticate with")
	fs.StringVar(&f.nats.User, "nats-user", "", "with --nats-url: user name to authenticate with (password from --nats-password-file)")
	fs.StringVar(&f.nats.PasswordFile, "nats-password-file", "", "with --nats-user: file holding the password")
	fs.StringVar(&f.nats.TLSCAFile, "nats-tls-ca", "", "with --nats-url: PEM file of the CA that signed the NATS server's certificate (turns TLS on)")
	fs.StringVar(&f.nats.TLSCertFile, "nats-tls-cert", "", "with --nats-url: PEM client certificate for mutual TLS (with --nats-tls-key)")
	fs.StringVar(&f.nats.TLSKeyFile, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
	fs.StringVar(&f.format, "format", "text", "output format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the messages written to stderr: debug, info, warn or error")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "file of the bearer tokens the API accepts, one a line; required beyond loopback unless --generate-auth-token")
	fs.BoolVar(&f.generateAuthToken, "generate-auth-token", false, "use DATA-DIR/"+server.AuthTokenFileName+" as the token file, creating it (0600, printed once on stderr) if it does not exist")
	fs.StringSliceVar(&f.authExempt, "auth-exempt", nil, "paths served without a token, comma-separated (e.g. /healthz)")
	fs.StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "host names the Host header may carry besides the listen address and loopback names")
	fs.StringVar(&f.token, "token", "", "with --update: the running process's bearer token (default: --token-file, $WEIR_TOKEN, --auth-token-file, DATA-DIR/"+server.AuthTokenFileName+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --update: file holding the running process's bearer token")
	fs.StringVar(&f.pubsubGRPCListen, "pubsub-grpc-listen", server.DefaultPubSubGRPCListen, "address of Google's Pub/Sub v1 gRPC API over the broker (PUBSUB_EMULATOR_HOST); '' turns it off; a busy port is a warning")
	fs.StringVar(&f.pubsubProject, "pubsub-project", "", "the only project ID the Pub/Sub gRPC API accepts (default: any)")
	fs.StringSliceVar(&f.fileRoots, "file-roots", nil, "directories the file paths of YAML pipelines submitted to the API may lead into (default: the current directory and the data directory)")
	fs.StringSliceVar(&f.allowedSQLHosts, "allowed-sql-hosts", nil, "hosts the PostgreSQL dsns of YAML pipelines submitted to the API may name (default localhost,127.0.0.0/8,::1)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve the API over HTTPS with, read again when it changes (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "with --update: PEM file of the CA that signed the running process's certificate (default $"+client.TLSCAEnv+", else --tls-cert's own chain, else the system's roots)")
	fs.StringVar(&f.traceMemory, "rehearse-trace-memory", "", "memory budget of the recorded stretch of a pre-flight rehearsal (weir_rehearse=required; 64MiB, 1GiB, 512MB; default 256MiB): beyond it, its older part spills to --rehearse-trace-dir")
	fs.StringVar(&f.traceDir, "rehearse-trace-dir", "", "an existing directory a pre-flight rehearsal's recorded stretch spills to beyond --rehearse-trace-memory, as an unlinked file (default $TMPDIR); clients cannot choose it")
	if err := fs.Parse(args); err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, withCode(ExitUsage, fmt.Errorf("unexpected argument %q (the program takes flags only)", fs.Arg(0)))
	}
	if f.jobName == "" {
		return nil, withCode(ExitUsage, errors.New("--job-name is required: the name of the program's job (lower-case letters, digits and '-')"))
	}
	if err := record.ValidateJobName(f.jobName); err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--job-name: %w", err))
	}
	if f.format != "text" && f.format != "json" {
		return nil, withCode(ExitUsage, fmt.Errorf("--format %q: want text or json", f.format))
	}
	if f.checkpointInterval < 10*time.Millisecond {
		return nil, withCode(ExitUsage, fmt.Errorf("--checkpoint-interval %s: want at least 10ms", f.checkpointInterval))
	}
	if !f.update && f.fromSnapshot == "" && (fs.Changed("transform-name-mapping") || f.allowSourceChange) {
		return nil, withCode(ExitUsage, errors.New("--transform-name-mapping and --allow-source-change apply to --update and --create-from-snapshot"))
	}
	if f.fromSnapshot != "" && (f.update || f.validateOnly) {
		return nil, withCode(ExitUsage, errors.New("--create-from-snapshot creates a new job: it does not go with --update or --validate-only"))
	}
	if _, err := compat.ParseMapping(f.mapping); err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--transform-name-mapping: %w", err))
	}
	n, err := sandbox.ParseTraceMemory(f.traceMemory)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--rehearse-trace-memory %q: %w", f.traceMemory, err))
	}
	f.traceBytes = n
	if err := sandbox.CheckSpillDir(f.traceDir); err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--rehearse-trace-dir %q: %w", f.traceDir, err))
	}
	opts := record.JobOptions{NumWorkers: f.numWorkers, MaxNumWorkers: f.maxNumWorkers}
	if err := opts.Validate(); err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("%w", err))
	}
	return f, nil
}

// program is one run of Run.
type program struct {
	f      *flags
	out    io.Writer
	log    *slog.Logger
	dir    string
	exe    string
	build  func(p *weir.Pipeline) error
	report func(r *compat.Report, replaced *record.Summary, err error) error
}

// DefaultDataDir is a program's data directory when --data-dir is not
// given: ./JOB_NAME-data, apart from a weir server's ./weir-data and from
// the programs of other job names.
func DefaultDataDir(jobName string) string { return "./" + jobName + "-data" }

// Run runs a Go program's job with the command line args (without the
// program name), printing to stdout; logs go to stderr. build constructs
// the pipeline on p, which is built for the job p.Job() describes; it may
// be called several times (for the graph, for each job) and must build
// the same graph each time.
//
// What a start does depends on the data directory (see the README's "Go
// SDK programs"): a free directory starts a new job, resumes the job of
// --job-name when its stored graph equals this build's, or, with --update,
// replaces it in the store after the compatibility check; a directory
// held by a running process is refused without --update, and with it the
// running process checks this build's graph, checkpoints its job and
// releases the directory, and this process takes the job over in place.
// Once running, the program serves the job service's HTTP API on --listen
// (its address is the first line on stdout) and returns when its job
// ends, on SIGTERM or SIGINT (its job checkpointed, to resume at the next
// start), when ctx ends, or when a new build takes the job over.
func Run(ctx context.Context, args []string, stdout io.Writer, build func(p *weir.Pipeline) error) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	// A signal during the start (waiting for a lock, opening the store)
	// stops it cleanly too; once running, the process waits for one.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return withCode(ExitUsage, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel))
	}
	if f.dataDir == "" {
		f.dataDir = DefaultDataDir(f.jobName)
	}
	dir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("resolving the data directory: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "(unknown executable)"
	}
	pr := &program{f: f, out: stdout, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
		dir: dir, exe: exe, build: build}
	return pr.run(ctx)
}

// load is the service's ProgramLoader: this build's pipeline for job.
func (pr *program) load(job weir.JobInfo) (*weir.Pipeline, error) {
	if job.Name != pr.f.jobName {
		return nil, fmt.Errorf("this program runs job %s, not %s", pr.f.jobName, job.Name)
	}
	p := weir.NewJobPipeline(job)
	if err := pr.build(p); err != nil {
		return nil, err
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func (pr *program) run(ctx context.Context) error {
	f := pr.f
	gp, err := pr.load(weir.JobInfo{Name: f.jobName, DataDir: pr.dir})
	if err != nil {
		return withCode(ExitInvalidPipeline, fmt.Errorf("building the pipeline: %w", err))
	}
	canon, err := gp.Graph().Canonical()
	if err != nil {
		return withCode(ExitInvalidPipeline, fmt.Errorf("serialising the pipeline graph: %w", err))
	}
	if f.validateOnly && !f.update {
		fmt.Fprintf(pr.out, "the pipeline of %s is valid (%d steps); nothing ran (--validate-only)\n", f.jobName, len(gp.Graph().Steps))
		return nil
	}

	lock, err := server.TryLockDataDir(pr.dir)
	if errors.Is(err, server.ErrDataDirLocked) {
		if lock, err = pr.takeOver(ctx, canon); lock == nil {
			return err
		}
	}
	if err != nil {
		return withCode(ExitFailure, err)
	}
	p, err := server.Open(ctx, server.Config{DataDir: pr.dir, Listen: f.listen, CheckpointInterval: f.checkpointInterval,
		NATSURL: f.natsURL, NATSCredentials: f.nats, Logger: pr.log, Program: pr.load, Kind: server.KindProgram, JobName: f.jobName,
		ProgramPath: pr.exe, Lock: lock, AuthTokenFile: f.authTokenFile, GenerateAuthToken: f.generateAuthToken,
		AuthExempt: f.authExempt, AllowedHosts: f.allowedHosts, PubSubGRPCListen: f.pubsubGRPCListen, PubSubProject: f.pubsubProject,
		FileRoots: f.fileRoots, AllowedSQLHosts: f.allowedSQLHosts, TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey,
		RehearseTraceMemory: f.traceBytes, RehearseTraceDir: f.traceDir})
	if errors.Is(err, server.ErrAuthRequired) || errors.Is(err, server.ErrTLSConfig) || errors.Is(err, server.ErrNATSConfig) {
		return withCode(ExitUsage, errors.Join(err, lock.Unlock()))
	}
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if tok := p.GeneratedToken(); tok != "" {
		fmt.Fprintf(os.Stderr, "generated an auth token in %s (shown this once; clients: --token-file %s or WEIR_TOKEN=...):\n%s\n", p.TokenFile(), p.TokenFile(), tok)
	}
	var st *service.ProgramStart
	if f.fromSnapshot != "" {
		st, err = pr.fromSnapshot(ctx, p.Service())
	} else {
		st, err = p.Service().StartProgram(ctx, service.ProgramRequest{Name: f.jobName, Program: pr.exe,
			Options: record.JobOptions{NumWorkers: f.numWorkers, MaxNumWorkers: f.maxNumWorkers},
			Update:  f.update, Mapping: f.mapping, AllowSourceChange: f.allowSourceChange, ValidateOnly: f.validateOnly})
	}
	if err != nil || st.Job == nil {
		closeErr := p.Close(ctx)
		if st != nil && st.Report != nil {
			running := ""
			if st.Replaced != nil {
				running = st.Replaced.ID
			}
			return errors.Join(pr.printReport(st.Report, running, err), closeErr)
		}
		code := ExitFailure
		if service.ErrorCode(err) == errcode.InvalidPipeline {
			code = ExitInvalidPipeline
		}
		return errors.Join(withCode(code, err), closeErr)
	}
	if st.Job.State == record.StateFailed {
		return errors.Join(withCode(ExitFailure, fmt.Errorf("job %s (%s) failed to start: %s", st.Job.ID, st.Job.Name, st.Job.Error)), p.Close(ctx))
	}
	if err := p.Serve(); err != nil {
		return errors.Join(withCode(ExitFailure, err), p.Close(ctx))
	}
	if err := pr.printStart(p, st); err != nil {
		return errors.Join(err, p.Close(ctx))
	}
	return pr.wait(ctx, p, st.Job)
}

// takeOver handles a data directory held by another process: without
// --update it is an error naming the process; with it, the process is
// asked to check this build and release the directory, which this process
// then locks. A nil lock comes with the error (or nil, for a validation
// that passed) to return.
func (pr *program) takeOver(ctx context.Context, canon []byte) (*server.DirLock, error) {
	f := pr.f
	inUse := server.InUseError(pr.dir, server.ErrDataDirLocked)
	ctl, err := server.ReadControlFile(pr.dir)
	if err == nil && ctl.Kind != server.KindProgram {
		// A server's directory: --update cannot help either.
		return nil, withCode(ExitFailure, fmt.Errorf("%w; a weir server does not hand its data directory over: give this program its own --data-dir (the default is ./JOB_NAME-data)", inUse))
	}
	if !f.update {
		return nil, withCode(ExitFailure, fmt.Errorf("%w; to replace its job with this build, start this build with --update", inUse))
	}
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("%w, which has not published its address yet (%w): try again once it has started", inUse, err))
	}
	hc, err := client.NewHTTPClient(pr.releaseCA(), server.DefaultShutdownTimeout+time.Minute)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--tls-ca: %w", err))
	}
	c, err := client.NewClient(ctl.Address, hc)
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("the control file's address: %w", err))
	}
	tok, err := pr.releaseToken()
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	c = c.WithToken(tok)
	pr.log.Info("asking the running process to release the data directory", "pid", ctl.PID, "address", ctl.Address)
	res, err := c.Release(ctx, client.ReleaseRequest{Name: f.jobName, Graph: canon, Program: pr.exe,
		TransformNameMapping: f.mapping, AllowSourceChange: f.allowSourceChange, ValidateOnly: f.validateOnly})
	if errors.Is(err, client.ErrUnreachable) {
		// The process died (or is dying) without answering: once its lock is
		// free, the stored swap runs the check itself.
		pr.log.Warn("the running process did not answer; waiting for the data directory's lock", "pid", ctl.PID, "error", err)
		lock, lerr := server.LockDataDir(ctx, pr.dir, TakeoverTimeout)
		if lerr != nil {
			return nil, withCode(ExitFailure, fmt.Errorf("%w, which does not answer at %s: %w", inUse, ctl.Address, lerr))
		}
		return lock, nil
	}
	if res != nil && res.Report != nil && (err != nil || f.validateOnly) {
		rep, cerr := compatReport(*res.Report)
		if cerr != nil {
			return nil, withCode(ExitFailure, cerr)
		}
		running := ""
		if res.Replaced != nil {
			running = res.Replaced.ID
		}
		return nil, pr.printReport(rep, running, err)
	}
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("asking process %d at %s to release the data directory: %w", ctl.PID, ctl.Address, err))
	}
	if f.validateOnly {
		fmt.Fprintf(pr.out, "job %s has no active job in process %d: nothing to check\n", f.jobName, ctl.PID)
		return nil, nil
	}
	if res.Report != nil && (len(res.Report.Warnings) > 0 || len(res.Report.DroppedState) > 0) {
		pr.log.Warn("the update passed the check with warnings or dropped state; the report follows once this process has taken over")
	}
	pr.log.Info("the running process released the data directory; taking it over", "pid", ctl.PID)
	lock, err := server.LockDataDir(ctx, pr.dir, TakeoverTimeout)
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("process %d released the data directory but still holds its lock: %w", ctl.PID, err))
	}
	return lock, nil
}

// releaseCA is the CA file the release call trusts: --tls-ca, else
// $WEIR_TLS_CA, else this build's own --tls-cert (a chain that ends in its
// CA, or a self-signed certificate, which the running build most likely
// shares); "" trusts the system's roots.
func (pr *program) releaseCA() string {
	if ca := client.ClientCAFile(pr.f.tlsCA); ca != "" {
		return ca
	}
	return pr.f.tlsCert
}

// releaseToken is the bearer token of the release call: --token, else
// --token-file, else $WEIR_TOKEN, else this build's own --auth-token-file,
// else the data directory's generated token file if there is one; ""
// sends none (a predecessor on loopback without a token file).
func (pr *program) releaseToken() (string, error) {
	f := pr.f
	if tok, found, err := client.ClientToken(f.token, f.tokenFile); err != nil || found {
		return tok, err
	}
	switch {
	case f.authTokenFile != "":
		tok, err := client.ReadToken(f.authTokenFile)
		if err != nil {
			return "", fmt.Errorf("--auth-token-file: %w", err)
		}
		return tok, nil
	}
	tok, err := client.ReadToken(filepath.Join(pr.dir, server.AuthTokenFileName))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// updateOutput is what a refused or validated --update prints with
// --format json (weir run --update's shape).
type updateOutput struct {
	Name           string        `json:"name"`
	ValidateOnly   bool          `json:"validate_only,omitempty"`
	Compatibility  compat.Report `json:"compatibility"`
	RunningJobLeft string        `json:"running_job_left_untouched,omitempty"`
}

// printReport prints the compatibility report of a refused or
// validate-only --update and returns the error to exit with: ExitIncompatible
// when refused, nil when a validation passed, err's otherwise. runningJob
// is the ID of the job the check ran against, "" if none.
func (pr *program) printReport(r *compat.Report, runningJob string, err error) error {
	f := pr.f
	if f.format == "json" {
		out := updateOutput{Name: f.jobName, ValidateOnly: f.validateOnly, Compatibility: *r, RunningJobLeft: runningJob}
		if werr := writeJSON(pr.out, out); werr != nil {
			return werr
		}
	} else {
		if r.Compatible {
			fmt.Fprintf(pr.out, "the update of %s is compatible (not applied: --validate-only)\n", f.jobName)
		}
		if !r.Compatible || len(r.Warnings) > 0 || len(r.DroppedState) > 0 {
			if werr := r.WriteText(pr.out); werr != nil {
				return withCode(ExitFailure, werr)
			}
		}
	}
	if err == nil {
		return nil
	}
	var ae *client.Error
	if errors.As(err, &ae) && ae.Code == errcode.IncompatibleUpdate || service.ErrorCode(err) == errcode.IncompatibleUpdate {
		return withCode(ExitIncompatible, err)
	}
	return withCode(ExitFailure, err)
}

// compatReport is the compatibility report a running process answered, as
// package compat's (which prints it): the two share their JSON form.
func compatReport(r client.CompatReport) (*compat.Report, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("reading the running process's compatibility report: %w", err)
	}
	var out compat.Report
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reading the running process's compatibility report: %w", err)
	}
	return &out, nil
}

// startOutput is the first line of --format json.
type startOutput struct {
	Address string         `json:"address"`
	DataDir string         `json:"data_dir"`
	Action  string         `json:"action"`
	Job     record.Summary `json:"job"`
	Report  *compat.Report `json:"report,omitempty"`
}

// printStart prints the API's address (the first line) and what started.
func (pr *program) printStart(p *server.Process, st *service.ProgramStart) error {
	if pr.f.format == "json" {
		return writeJSON(pr.out, startOutput{Address: p.Address(), DataDir: p.DataDir(), Action: st.Action, Job: st.Job.Summary(), Report: st.Report})
	}
	fmt.Fprintf(pr.out, "weir program listening on %s (job %s, data dir %s)\n", p.Address(), pr.f.jobName, p.DataDir())
	fmt.Fprintln(pr.out, st.String())
	if r := st.Report; r != nil && (len(r.Warnings) > 0 || len(r.DroppedState) > 0) {
		if err := r.WriteText(pr.out); err != nil {
			return withCode(ExitFailure, err)
		}
	}
	return nil
}

// wait runs until the job ends, a signal, the end of ctx, or a release,
// then shuts the process down.
func (pr *program) wait(ctx context.Context, p *server.Process, j *record.Job) error {
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan *record.Job, 1)
	go func() {
		if end, err := p.Service().WaitJob(jobCtx, j.ID); err == nil {
			ended <- end
			cancel()
		}
	}()
	stop, werr := p.Wait(jobCtx)
	cancel()
	closeErr := p.Close(context.WithoutCancel(ctx))
	select {
	case end := <-ended:
		pr.log.Info("job ended", "job_id", end.ID, "state", end.State)
		if pr.f.format == "text" {
			fmt.Fprintf(pr.out, "job %s (%s) ended %s\n", end.ID, end.Name, end.State)
		}
		if end.State == record.StateFailed {
			return errors.Join(withCode(ExitFailure, fmt.Errorf("job %s (%s) failed: %s", end.ID, end.Name, end.Error)), closeErr)
		}
		return withCode(ExitFailure, closeErr)
	default:
	}
	switch stop {
	case server.StopReleased:
		if pr.f.format == "text" {
			fmt.Fprintf(pr.out, "released the data directory to a new build of the program\n")
		}
		return withCode(ExitFailure, errors.Join(werr, closeErr))
	case server.StopFailed:
		return withCode(ExitFailure, errors.Join(werr, closeErr))
	}
	return withCode(ExitFailure, closeErr)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("encoding the output: %w", err))
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return withCode(ExitFailure, fmt.Errorf("writing output: %w", err))
	}
	return nil
}

// fromSnapshot creates the job of --job-name from snapshot
// --create-from-snapshot with this build (the compatibility check of the
// snapshot's graph against this build's runs first; a refusal creates
// nothing and comes with the report).
func (pr *program) fromSnapshot(ctx context.Context, svc *service.Service) (*service.ProgramStart, error) {
	f := pr.f
	res, err := svc.CreateFromSnapshot(ctx, service.FromSnapshotRequest{
		SubmitRequest: service.SubmitRequest{Name: f.jobName, Options: record.JobOptions{NumWorkers: f.numWorkers, MaxNumWorkers: f.maxNumWorkers}},
		SnapshotID:    f.fromSnapshot, Mapping: f.mapping, AllowSourceChange: f.allowSourceChange, Program: pr.exe})
	if res == nil {
		return nil, err
	}
	st := &service.ProgramStart{Action: service.ActionCreatedFromSnapshot, Job: res.Job}
	if len(res.Report.Errors) > 0 || len(res.Report.Warnings) > 0 || len(res.Report.DroppedState) > 0 || err != nil {
		r := res.Report
		st.Report = &r
	}
	return st, err
}
