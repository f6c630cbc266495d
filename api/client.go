package api

import (
	"net/http"
	"time"

	"github.com/weir-dev/weir/client"
)

// The Go client and the wire types live in package client, which a
// program that talks to a server imports without linking the server.
// These names keep programs written against package api compiling.

// DefaultServer is client.DefaultServer.
const DefaultServer = client.DefaultServer

// ErrUnreachable is client.ErrUnreachable.
var ErrUnreachable = client.ErrUnreachable

// ErrTLS is client.ErrTLS.
var ErrTLS = client.ErrTLS

// ErrStreamEnded is client.ErrStreamEnded.
var ErrStreamEnded = client.ErrStreamEnded

// TLSCAEnv is client.TLSCAEnv.
const TLSCAEnv = client.TLSCAEnv

// Client is client.Client.
type Client = client.Client

// Error is client.Error.
type Error = client.Error

// DeleteOption is client.DeleteOption.
type DeleteOption = client.DeleteOption

// NewClient is client.NewClient.
func NewClient(addr string, hc *http.Client) (*Client, error) { return client.NewClient(addr, hc) }

// NewHTTPClient is client.NewHTTPClient.
func NewHTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	return client.NewHTTPClient(caFile, timeout)
}

// ClientCAFile is client.ClientCAFile.
func ClientCAFile(caFile string) string { return client.ClientCAFile(caFile) }

// Force is client.Force.
func Force() DeleteOption { return client.Force() }

// The requests and replies of the routes (package client documents each).
type (
	SubmitRequest                     = client.SubmitRequest
	SubmitResponse                    = client.SubmitResponse
	JobList                           = client.JobList
	ErrorBody                         = client.ErrorBody
	ErrorDetail                       = client.ErrorDetail
	UpdateRequest                     = client.UpdateRequest
	UpdateResponse                    = client.UpdateResponse
	HistoryResponse                   = client.HistoryResponse
	OptionsRequest                    = client.OptionsRequest
	OptionsResponse                   = client.OptionsResponse
	EventList                         = client.EventList
	RollbackRequest                   = client.RollbackRequest
	RollbackResponse                  = client.RollbackResponse
	ReleaseRequest                    = client.ReleaseRequest
	ReleaseResponse                   = client.ReleaseResponse
	CreateSnapshotRequest             = client.CreateSnapshotRequest
	SnapshotList                      = client.SnapshotList
	FromSnapshotRequest               = client.FromSnapshotRequest
	ImportRequest                     = client.ImportRequest
	ImportResponse                    = client.ImportResponse
	CreateSubscriptionSnapshotRequest = client.CreateSubscriptionSnapshotRequest
	SubscriptionSnapshotList          = client.SubscriptionSnapshotList
	SeekRequest                       = client.SeekRequest
	Topic                             = client.Topic
	Subscription                      = client.Subscription
	SubscriptionJob                   = client.SubscriptionJob
	CreateTopicRequest                = client.CreateTopicRequest
	TopicList                         = client.TopicList
	BrokerInfo                        = client.BrokerInfo
	PublishMessage                    = client.PublishMessage
	PublishRequest                    = client.PublishRequest
	PublishResult                     = client.PublishResult
	PublishResponse                   = client.PublishResponse
	CreateSubscriptionRequest         = client.CreateSubscriptionRequest
	SubscriptionList                  = client.SubscriptionList
	PullRequest                       = client.PullRequest
	PulledMessage                     = client.PulledMessage
	PullResponse                      = client.PullResponse
)

// Limits of requests, client's.
const (
	// MaxRequestBytes is client.MaxRequestBytes.
	MaxRequestBytes = client.MaxRequestBytes
	// MaxPull is client.MaxPull.
	MaxPull = client.MaxPull
	// ImportChunkBytes is client.ImportChunkBytes.
	ImportChunkBytes = client.ImportChunkBytes
	// DefaultEventLimit is client.DefaultEventLimit.
	DefaultEventLimit = client.DefaultEventLimit
)
