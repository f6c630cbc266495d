package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Table is a SQL table a WriteToSql sink of the server's jobs writes
// (GET /v1/tables, GET /v1/tables/{name}).
type Table struct {
	// Name is the table's name: for layout staged, the view's.
	Name string `json:"name"`
	// Layout is "table" or "staged"; Driver "sqlite" or "postgres".
	Layout string `json:"layout"`
	Driver string `json:"driver"`
	// Jobs are the names of the jobs whose pipelines write it.
	Jobs []string `json:"jobs"`
	// Members are the tables behind a staged view (the principal, then the
	// staging tables oldest first); a plain table has itself.
	Members []TableMember `json:"members"`
	// View summarises a staged view's rule (describe only).
	View string `json:"view,omitempty"`
	// Merges are the recent merges, newest first: the last one in a list,
	// up to 20 in a describe.
	Merges []TableMerge `json:"merges,omitempty"`
	// Error says why the database could not be read.
	Error string `json:"error,omitempty"`
}

// TableMember is one table behind a staged view.
type TableMember struct {
	Table string `json:"table"`
	// Role is "principal", "staging" or "table".
	Role string `json:"role"`
	// Generation is the job generation that created a staging table.
	Generation int64 `json:"generation,omitempty"`
	// Rows is how many rows it holds; -1 when the database could not be read.
	Rows int64 `json:"rows"`
	// Columns are "name type" (describe only).
	Columns []string `json:"columns,omitempty"`
}

// TableMerge is one merge of a staged table, or the reply to POST
// /v1/tables/{name}:merge.
type TableMerge struct {
	At             time.Time `json:"at"`
	DurationMillis int64     `json:"duration_ms"`
	// Rows is how many rows moved into the principal table.
	Rows int64 `json:"rows"`
	// Members says from which staging tables ("table:rows", comma-separated).
	Members string `json:"members"`
	// Principal is the table merged into (merge reply only).
	Principal string `json:"principal,omitempty"`
}

// TableList is the reply to GET /v1/tables.
type TableList struct {
	Tables []Table `json:"tables"`
}

// ListTables returns the SQL tables the server's jobs write, by name.
func (c *Client) ListTables(ctx context.Context) ([]Table, error) {
	var out TableList
	if err := c.do(ctx, http.MethodGet, "/v1/tables", nil, &out); err != nil {
		return nil, err
	}
	return out.Tables, nil
}

// GetTable describes the SQL table name.
func (c *Client) GetTable(ctx context.Context, name string) (*Table, error) {
	var out Table
	if err := c.do(ctx, http.MethodGet, "/v1/tables/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MergeTable merges the staged table name's staging tables into its
// principal table now and returns what moved.
func (c *Client) MergeTable(ctx context.Context, name string) (*TableMerge, error) {
	var out TableMerge
	if err := c.do(ctx, http.MethodPost, "/v1/tables/"+url.PathEscape(name)+":merge", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
