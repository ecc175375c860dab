package agent

import (
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger builds the agents' logger from the options the zap flags set,
// as controller-runtime's zap.New does, with one difference: no line is
// dropped. In production mode (the default) zap.New wraps the logger in
// zap's sampler, which writes the first 100 lines of a message each second
// and then every 100th. The sampler keeps its counts in a table of 4,096
// per level, 448 KiB allocated at start: in the member at 1,200 mirrors that
// was the largest object of a 3 MiB live heap, and the collector, which
// sizes the heap after what is live, let the heap grow half as much again
// (GOGC=50). The agents log per reconcile and per cluster, not per object
// written, so a storm of one message is bounded by the work queue's back-off
// already, and a line dropped is the one someone needs.
//
// Written here, not taken from zap.New: controller-runtime has no option to
// leave the sampler out; what follows is its production defaults (JSON,
// info, stack traces from error on, RFC 3339 times, the Kubernetes-aware
// encoder) without it. Development mode (--zap-devel) samples nothing in
// controller-runtime either, and is left to zap.New.
func newLogger(o zap.Options) logr.Logger {
	if o.Development {
		return zap.New(zap.UseFlagOptions(&o))
	}
	if o.NewEncoder == nil {
		o.NewEncoder = func(opts ...zap.EncoderConfigOption) zapcore.Encoder {
			cfg := uzap.NewProductionEncoderConfig()
			for _, opt := range opts {
				opt(&cfg)
			}
			return zapcore.NewJSONEncoder(cfg)
		}
	}
	if o.Level == nil {
		lvl := uzap.NewAtomicLevelAt(uzap.InfoLevel)
		o.Level = &lvl
	}
	if o.StacktraceLevel == nil {
		lvl := uzap.NewAtomicLevelAt(uzap.ErrorLevel)
		o.StacktraceLevel = &lvl
	}
	if o.TimeEncoder == nil {
		o.TimeEncoder = zapcore.RFC3339TimeEncoder
	}
	timeEncoder := o.TimeEncoder
	// First, as controller-runtime puts it: options of the caller come after.
	opts := append([]zap.EncoderConfigOption{func(c *zapcore.EncoderConfig) { c.EncodeTime = timeEncoder }}, o.EncoderConfigOptions...)
	if o.Encoder == nil {
		o.Encoder = o.NewEncoder(opts...)
	}
	if o.DestWriter == nil {
		o.DestWriter = os.Stderr
	}
	sink := zapcore.AddSync(o.DestWriter)
	core := zapcore.NewCore(&zap.KubeAwareEncoder{Encoder: o.Encoder}, sink, o.Level)
	zopts := append(o.ZapOpts, uzap.AddStacktrace(o.StacktraceLevel), uzap.ErrorOutput(sink))
	return zapr.NewLogger(uzap.New(core).WithOptions(zopts...))
}
