// Real Redis for tests and benchmarks, one harness: import from here. Each concept is a file in redis/:
//   shared.ts      getRedis(): the server suites share (REDIS_URL, else testcontainers, else spawned)
//   server.ts      startRedis(): a spawned server to kill, restart on its port, pause (SIGSTOP)
//   cluster.ts     startCluster(): 3 masters, optionally a replica each, a master killed and failed over
//   use-cluster.ts useCluster(): a describe block's Cluster, started before its tests and stopped after
//   sentinel.ts    startSentinel(): master, replica and 3 sentinels, failover
//   containers.ts  testcontainers, when a Docker engine answers
//   proxy.ts       startProxy(): a TCP proxy in front of a node that can lose one reply on purpose
//   ports.ts, probe.ts, redis-process.ts: free ports, admin connections, the redis-server processes
// Handles expose host and port (cluster nodes, sentinels too), so clients of any library can connect.
export { type ClusterNodeInfo, type RedisCluster, startCluster } from './redis/cluster.js';
export { accepting, freePort, HOST, refused } from './redis/ports.js';
export { commandCalls, type NodeAddress, withConnection } from './redis/probe.js';
export { type RedisProxy, startProxy } from './redis/proxy.js';
export { type SentinelSetup, startSentinel } from './redis/sentinel.js';
export { type RedisServer, startRedis } from './redis/server.js';
export { getRedis } from './redis/shared.js';
export { type ClusterUnderTest, useCluster } from './redis/use-cluster.js';
