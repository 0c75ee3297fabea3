// Package devserver runs a complete Temporal server inside the transcriber
// process: frontend, history, matching and worker services on loopback,
// persistence in SQLite (a file, or memory for one-shot runs) or in
// PostgreSQL and, optionally, the Temporal Web UI. It lets a single binary
// do what otherwise needs a cluster.
package devserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/rpc/encryption"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/transcriber/transcriber/internal/devserver/pgurl"
)

const clusterName = "active"

// Options describe one embedded server.
type Options struct {
	// DatabaseFile is the SQLite file that holds all state. Empty keeps
	// everything in memory: it is gone when the process ends.
	DatabaseFile string
	// Postgres, when set, keeps all state in PostgreSQL instead: the
	// database it names, and its visibility database beside it. Missing
	// databases are created and their schema set up or migrated at start.
	Postgres *pgurl.URL
	// Host is the address all services bind to; loopback unless the operator
	// deliberately exposes the frontend.
	Host string
	// FrontendPort is the gRPC port clients dial. Zero picks a free port.
	FrontendPort int
	// UIAddr is host:port for the Web UI; empty disables it.
	UIAddr string
	// Namespace is created at start with SearchAttributes registered.
	Namespace        string
	SearchAttributes map[string]enumspb.IndexedValueType
	// Retention is how long closed workflows stay visible in the namespace.
	Retention time.Duration
	// Logger receives the server's own logs at LogLevel and above.
	Logger   *slog.Logger
	LogLevel slog.Level
	// TLS, when set, serves the frontend over TLS with this configuration;
	// its ClientAuth and ClientCAs make it mutual TLS. It stands for a
	// secured cluster such as Temporal Cloud, for the clients' tests.
	TLS *tls.Config
	// WithoutSystemWorker leaves out the server's own worker service
	// (scavengers, batch operations, schedules), which a one-shot run that
	// ends with its one job never needs; its start costs a checksum of the
	// whole executable.
	WithoutSystemWorker bool
	// APIKeys, when set, make the frontend refuse every call that does not
	// carry the metadata "authorization: Bearer <one of them>", as
	// Temporal Cloud refuses calls without a valid API key.
	APIKeys []string
}

// secured says whether clients must prove themselves to the frontend. The
// server's own services then reach it through an internal frontend on
// loopback instead, as a production cluster's do, so that they need
// neither certificates nor keys.
func (o Options) secured() bool { return o.TLS != nil || len(o.APIKeys) > 0 }

// Server is a running embedded Temporal server.
type Server struct {
	server       temporal.Server
	ui           *uiserver.Server
	frontendAddr string
	uiAddr       string
	database     string
	logLevel     *slog.LevelVar
	durable      *walSync
}

// Start builds and starts the server. It returns once the frontend accepts
// connections.
func Start(opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Namespace == "" {
		return nil, errors.New("devserver: namespace is required")
	}
	if opts.Postgres != nil && opts.DatabaseFile != "" {
		return nil, errors.New("devserver: a database file and PostgreSQL are two places for one state; give one")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TLS != nil && opts.UIAddr != "" {
		// The Web UI would need a client certificate of its own to dial a
		// mutual-TLS frontend; nothing needs both yet.
		return nil, errors.New("devserver: the web ui does not dial a TLS frontend; turn one of them off")
	}
	if opts.Retention <= 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.FrontendPort != 0 {
		if err := portAvailable(opts.Host, opts.FrontendPort); err != nil {
			return nil, fmt.Errorf("temporal frontend port: %w", err)
		}
	}
	// The UI server exits the whole process when it cannot bind, so the
	// address is checked here where the failure can still be reported.
	if opts.UIAddr != "" {
		l, err := net.Listen("tcp", opts.UIAddr)
		if err != nil {
			return nil, fmt.Errorf("web ui address: %w", err)
		}
		_ = l.Close()
	}

	conf, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	level := &slog.LevelVar{}
	level.Set(opts.LogLevel)
	var secret *redactor
	if opts.Postgres != nil {
		secret = newRedactor(opts.Postgres.Password)
	}
	logger := newServerLogger(opts.Logger, level, secret)
	sqlConf := conf.Persistence.DataStores[conf.Persistence.DefaultStore].SQL
	if err := prepareDatabase(sqlConf, opts, logger); err != nil {
		return nil, secret.error(err)
	}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("devserver authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("devserver claim mapper: %w", err)
	}
	hosts := map[primitives.ServiceName]static.Hosts{}
	services := slices.Sorted(maps.Keys(conf.Services))
	for _, name := range services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(opts.Host, strconv.Itoa(conf.Services[name].RPC.GRPCPort)))
	}
	// Every service keeps its address, run or not: the server wants a host
	// for each.
	run := services
	if opts.WithoutSystemWorker {
		run = slices.DeleteFunc(slices.Clone(services), func(s string) bool { return s == string(primitives.WorkerService) })
	}
	// ForceSearchAttributesCacheRefreshOnRead, which Temporal's own dev
	// server sets, stays off: it reads the namespace from the database,
	// under one lock, on every use of a search attribute (each start, each
	// upsert, each visibility write): 7% of the CPU of a load of short jobs.
	// The attributes are in the database before the server starts, and an
	// attribute added later is awaited by whoever adds it.
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// One history shard lets one persistence call at a time by default:
		// starts queued behind every running job's writes. Four overlap
		// their work around SQLite's one connection.
		dynamicconfig.ShardIOConcurrency.Key(): 4,
	}
	if len(opts.APIKeys) > 0 {
		keys := apiKeys(opts.APIKeys)
		authorizer, claimMapper = keys, keys
	}
	serverOpts := []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(run),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	}
	var durable *walSync
	if opts.DatabaseFile != "" {
		// PostgreSQL syncs its own commits, and a memory database has
		// nothing to sync.
		if durable, err = newWALSync(opts.DatabaseFile); err != nil {
			return nil, err
		}
		serverOpts = append(serverOpts, temporal.WithChainedFrontendGrpcInterceptors(durable.interceptor))
	}
	if opts.TLS != nil {
		// Only the public frontend speaks TLS; the services and the
		// internal frontend talk plain gRPC among themselves on loopback.
		serverOpts = append(serverOpts, temporal.WithTLSConfigFactory(&encryption.FixedTLSConfigProvider{FrontendServerConfig: opts.TLS}))
	}
	srv, err := temporal.NewServer(serverOpts...)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		if durable != nil {
			durable.close()
		}
		return nil, secret.error(fmt.Errorf("devserver start: %w", err))
	}
	s := &Server{server: srv, durable: durable, frontendAddr: net.JoinHostPort(opts.Host, strconv.Itoa(conf.Services["frontend"].RPC.GRPCPort)), database: describeDatabase(opts), logLevel: level}

	if opts.UIAddr != "" {
		host, portStr, _ := net.SplitHostPort(opts.UIAddr)
		port, _ := strconv.Atoi(portStr)
		s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
			Host:                host,
			Port:                port,
			TemporalGRPCAddress: s.frontendAddr,
			EnableUI:            true,
			DefaultNamespace:    opts.Namespace,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
			DisableNewsFetch:    true,
		}))
		s.uiAddr = opts.UIAddr
		go func() {
			if err := s.ui.Start(); err != nil {
				opts.Logger.Error("web ui stopped", "error", err)
			}
		}()
	}
	return s, nil
}

// Syncs is how many times the server has synced its SQLite log; it stays
// zero in memory and on PostgreSQL, which sync their own commits.
func (s *Server) Syncs() int64 {
	if s.durable == nil {
		return 0
	}
	return s.durable.syncs.Load()
}

// FrontendAddr is the host:port SDK clients dial.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIAddr is where the Web UI listens, or empty.
func (s *Server) UIAddr() string { return s.uiAddr }

// Database says where the state is kept, without credentials: a SQLite
// file, memory, or a PostgreSQL URL without its password.
func (s *Server) Database() string { return s.database }

func describeDatabase(opts Options) string {
	switch {
	case opts.Postgres != nil:
		return opts.Postgres.String()
	case opts.DatabaseFile != "":
		return "sqlite:" + opts.DatabaseFile
	default:
		return "memory"
	}
}

// Stop shuts the UI and all server services down.
func (s *Server) Stop() error {
	// While its services stop one by one, the server's internal clients
	// warn about peers that are already gone; that is noise, not news.
	s.logLevel.Set(slog.LevelError)
	if s.ui != nil {
		s.ui.Stop()
	}
	err := s.server.Stop()
	if s.durable != nil {
		s.durable.close()
	}
	return err
}

func buildConfig(opts Options) (*config.Config, error) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = opts.Host

	conf.Persistence = persistenceConfig(opts)

	names := []string{"frontend", "history", "matching", "worker"}
	// A gRPC port for each service and the frontend's HTTP port, all
	// found at once so that no two are the same.
	n := len(names) + 1
	if opts.secured() {
		names = append(names, string(primitives.InternalFrontendService))
		n += 2
	}
	ports, err := freePorts(opts.Host, n, opts.FrontendPort)
	if err != nil {
		return nil, err
	}
	next := func() int { p := ports[0]; ports = ports[1:]; return p }
	// The frontend's port is the operator's, else the first found.
	frontendPort := next()
	if opts.FrontendPort != 0 {
		frontendPort = opts.FrontendPort
	}
	frontend := net.JoinHostPort(opts.Host, strconv.Itoa(frontendPort))
	httpPort := next()
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				HTTPAddress:            net.JoinHostPort(opts.Host, strconv.Itoa(httpPort)),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range names {
		var svc config.Service
		svc.RPC.BindOnIP = opts.Host
		switch name {
		case "frontend":
			svc.RPC.GRPCPort = frontendPort
			svc.RPC.HTTPPort = httpPort
		case string(primitives.InternalFrontendService):
			svc.RPC.GRPCPort, svc.RPC.HTTPPort = next(), next()
		default:
			svc.RPC.GRPCPort = next()
		}
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	if opts.secured() {
		// Empty sends the server's own clients to the internal frontend.
		conf.PublicClient.HostPort = ""
	}
	return &conf, nil
}

func persistenceConfig(opts Options) config.Persistence {
	if u := opts.Postgres; u != nil {
		return config.Persistence{
			DefaultStore:     "default",
			VisibilityStore:  "visibility",
			NumHistoryShards: postgresShards,
			DataStores: map[string]config.DataStore{
				"default":    {SQL: postgresSQL(*u, u.Database)},
				"visibility": {SQL: postgresSQL(*u, u.VisibilityDatabase())},
			},
		}
	}
	sqlConf := &config.SQL{PluginName: sqliteplugin.PluginName}
	if opts.DatabaseFile == "" {
		// The SQLite plugin creates the schema of a memory database itself and
		// keeps its connection for the life of the process.
		sqlConf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlConf.DatabaseName = "transcriber-" + strconv.FormatUint(rand.Uint64(), 36)
	} else {
		// Write-ahead logging commits a transaction with one append, where
		// the default rollback journal writes every page twice, syncs
		// several times and creates and removes a file: most of the
		// server's own cost per job. synchronous=normal leaves the fsync of
		// the log to walSync, which makes every commit durable before the
		// frontend answers for it, so an accepted job survives a power cut.
		sqlConf.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"}
		sqlConf.DatabaseName = opts.DatabaseFile
	}
	// One store serves both roles: SQLite keeps visibility in the same file.
	return config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlConf}},
	}
}

// prepareDatabase creates the schema of a new database and registers the
// namespace with its search attributes. Both are no-ops when present, so a
// restart reuses everything the database already holds.
func prepareDatabase(sqlConf *config.SQL, opts Options, logger serverLogger) error {
	if opts.Postgres != nil {
		if err := preparePostgres(context.Background(), *opts.Postgres, logger); err != nil {
			return fmt.Errorf("devserver: %w", err)
		}
	} else if opts.DatabaseFile != "" {
		if _, err := os.Stat(opts.DatabaseFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(opts.DatabaseFile), 0o750); err != nil {
				return fmt.Errorf("devserver data dir: %w", err)
			}
			if err := sqliteschema.SetupSchema(sqlConf); err != nil {
				_ = os.Remove(opts.DatabaseFile)
				return fmt.Errorf("devserver schema %s: %w", opts.DatabaseFile, err)
			}
		} else if err != nil {
			return fmt.Errorf("devserver database %s: %w", opts.DatabaseFile, err)
		}
		if err := dropIdleVisibilityIndexes(sqlConf); err != nil {
			return fmt.Errorf("devserver database %s: %w", opts.DatabaseFile, err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return fmt.Errorf("devserver namespace %s: %w", opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(opts.Retention)
	// Despite its package, CreateNamespaces writes through whichever SQL
	// plugin sqlConf names, PostgreSQL included; the search attributes map
	// onto the same pre-made columns of SQL visibility.
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return fmt.Errorf("devserver namespace %s: %w", opts.Namespace, err)
	}
	return nil
}

// freePorts finds n distinct free ports other than taken. It holds each
// until it has all, so that the kernel cannot hand out one of them twice.
func freePorts(host string, n, taken int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		defer l.Close()
		if p := l.Addr().(*net.TCPAddr).Port; p != taken {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func portAvailable(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
