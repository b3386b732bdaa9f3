// Chain 1, NF 2: a Maglev load balancer over five backends.
//   eth0: clients (through the NAT); eth1: the backends.
// Each flow is sent to a backend by Maglev's 65,537-entry table and keeps it while the
// backend is up (connection tracking, 60 s idle timeout). Backend replies coming back on
// eth1 get the service address back as source. schedule.txt fails web3 (about a fifth of
// the flows) mid-trace and brings it back later. `--define TIMEOUT=2s` shortens the idle
// timeout (virtual time).
define($TIMEOUT 60s)

lb :: Maglev(BACKEND web1 10.0.1.1 02:00:00:00:01:01,
             BACKEND web2 10.0.1.2 02:00:00:00:01:02,
             BACKEND web3 10.0.1.3 02:00:00:00:01:03,
             BACKEND web4 10.0.1.4 02:00:00:00:01:04,
             BACKEND web5 10.0.1.5 02:00:00:00:01:05,
             SCHEDULE schedule.txt, TIMEOUT $TIMEOUT);

FromDevice(eth0) -> CheckIPHeader(14) -> [0]lb[0] -> ToDevice(eth1);
FromDevice(eth1) -> CheckIPHeader(14) -> [1]lb[1] -> ToDevice(eth0);
