package pubsub

// NewSource returns a source of b configured by cfg; see the package
// function NewSource. It lets a caller that holds the broker behind an
// interface (package yamlpipe) build connectors without knowing the type.
func (b *Broker) NewSource(cfg SourceConfig) (*Source, error) { return NewSource(b, cfg) }

// NewSink returns a sink of b configured by cfg; see the package function
// NewSink.
func (b *Broker) NewSink(cfg SinkConfig) (*Sink, error) { return NewSink(b, cfg) }
