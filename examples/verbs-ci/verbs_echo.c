/* verbs_echo: an RC echo test over libibverbs alone (no librdmacm).
 *
 * The server and the client exchange their QP numbers, PSNs, GIDs and buffer keys over a TCP
 * connection, connect one RC QP each, and then the client sends N messages of SIZE bytes with
 * SEND or RDMA WRITE (both with immediate data carrying the message number). The server checks
 * every byte and echoes the message back; the client checks every byte of the echo. Exit status
 * 0 when every message came back intact, 1 with one line on stderr otherwise, 2 for bad usage.
 */
#define _XOPEN_SOURCE 700 /* POSIX 2008 with lrand48 */

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { IB_PORT = 1, QUEUE_DEPTH = 4, INFO_LINE_MAX = 256 };

/* wr_id of the two kinds of work request, to tell their completions apart. */
enum { WR_RECV = 1, WR_SEND = 2 };

enum operation { OP_SEND, OP_WRITE };

struct options {
  bool server;
  const char *address; /* TCP address: the server listens on it, the client connects to it */
  unsigned port;
  const char *device; /* NULL: the first device */
  int gid_index;
  unsigned iters;
  unsigned size;
  enum operation op;
  int timeout_ms; /* how long to wait for any one completion or the peer */
};

/* What each side tells the other before connecting. The test parameters travel too, so that a
 * client and a server started with different ones fail at once rather than time out. */
struct peer_info {
  uint32_t qpn;
  uint32_t psn;
  uint32_t rkey;
  uint64_t addr;
  union ibv_gid gid;
  enum ibv_mtu mtu;
  unsigned iters;
  unsigned size;
  enum operation op;
};

struct endpoint {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *channel;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  unsigned char *send_buf; /* what this side sends */
  unsigned char *recv_buf; /* where the peer's SEND or WRITE lands */
  struct ibv_mr *send_mr;
  struct ibv_mr *recv_mr;
  /* Completions that arrived while waiting for the other kind: at most one send and one
   * receive are outstanding, so one slot of each is enough. */
  bool have_send_wc, have_recv_wc;
  struct ibv_wc send_wc, recv_wc;
  /* The TCP connection to the peer, watched while waiting for completions: it closes when the
   * peer exits, a failure to report at once rather than after the timeout. -1 before the
   * connection exists, and once the peer has sent its final "done". */
  int peer_fd;
};

static const char *role = "verbs_echo";

static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "verbs_echo: %s: ", role);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static const char *op_name(enum operation op) { return op == OP_SEND ? "send" : "write"; }

/* ---- options ---- */

static void print_usage(FILE *out) {
  fprintf(out, "usage: verbs_echo --server [OPTIONS]\n"
               "       verbs_echo --client [OPTIONS]\n"
               "\n"
               "An RC echo over libibverbs: the client sends N messages with SEND or RDMA WRITE, the\n"
               "server checks and echoes each one, the client checks the echo. QP details are\n"
               "exchanged over TCP. Exit status: 0 every byte checked, 1 failure, 2 bad usage.\n"
               "\n"
               "  -s, --server          wait for a client\n"
               "  -c, --client          connect to a server\n"
               "  -a, --address ADDR    IPv4 address of the TCP exchange (default 127.0.0.1)\n"
               "  -p, --port PORT       TCP port of the exchange (default 18515)\n"
               "  -d, --ib-dev NAME     RDMA device (default: the first one)\n"
               "  -g, --gid-idx INDEX   GID table index of port 1 (default 0)\n"
               "  -n, --iters N         number of messages (default 100)\n"
               "  -S, --size BYTES      message size (default 4096)\n"
               "  -o, --op send|write   SEND or RDMA WRITE, both with immediate data (default send)\n"
               "  -t, --timeout SECONDS longest wait for one completion or the peer (default 10)\n"
               "  -h, --help            this text\n"
               "Both sides must be given the same -n, -S and -o.\n");
}

static _Noreturn void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "verbs_echo: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (--help shows the usage)\n");
  exit(2);
}

static unsigned parse_unsigned(const char *text, unsigned min, unsigned max, const char *what) {
  char *end;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value < min || value > max)
    usage_error(what, text);
  return (unsigned)value;
}

static struct options parse_options(int argc, char **argv) {
  struct options o = {.address = "127.0.0.1", .port = 18515, .iters = 100, .size = 4096, .timeout_ms = 10000};
  bool server = false, client = false;
  static const struct option longs[] = {
      {"server", no_argument, NULL, 's'},        {"client", no_argument, NULL, 'c'},
      {"address", required_argument, NULL, 'a'}, {"port", required_argument, NULL, 'p'},
      {"ib-dev", required_argument, NULL, 'd'},  {"gid-idx", required_argument, NULL, 'g'},
      {"iters", required_argument, NULL, 'n'},   {"size", required_argument, NULL, 'S'},
      {"op", required_argument, NULL, 'o'},      {"timeout", required_argument, NULL, 't'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "sca:p:d:g:n:S:o:t:h", longs, NULL)) != -1) {
    switch (c) {
      case 's':
        server = true;
        break;
      case 'c':
        client = true;
        break;
      case 'a':
        o.address = optarg;
        break;
      case 'p':
        o.port = parse_unsigned(optarg, 1, 65535, "bad port '%s'");
        break;
      case 'd':
        o.device = optarg;
        break;
      case 'g':
        o.gid_index = (int)parse_unsigned(optarg, 0, 255, "bad GID index '%s'");
        break;
      case 'n':
        o.iters = parse_unsigned(optarg, 1, 100000000, "bad message count '%s'");
        break;
      case 'S':
        o.size = parse_unsigned(optarg, 1, 1u << 30, "bad message size '%s'");
        break;
      case 't':
        o.timeout_ms = (int)parse_unsigned(optarg, 1, 3600, "bad timeout '%s'") * 1000;
        break;
      case 'o':
        if (strcmp(optarg, "send") == 0)
          o.op = OP_SEND;
        else if (strcmp(optarg, "write") == 0)
          o.op = OP_WRITE;
        else
          usage_error("bad operation '%s': send or write", optarg);
        break;
      case 'h':
        print_usage(stdout);
        exit(0);
      default:
        usage_error("%s", "bad option");
    }
  }
  if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
  if (server == client) usage_error("%s", "give exactly one of --server and --client");
  o.server = server;
  return o;
}

/* ---- the data pattern ---- */

/* Depends on the message number, so a stale or repeated message fails, and on the offset with
 * a term that changes every 256 bytes, so a block landing at the wrong offset fails too. */
static unsigned char pattern_byte(unsigned seq, size_t offset) {
  return (unsigned char)(seq * 97u + offset * 13u + (offset >> 8) * 7u + 1u);
}

static void fill_pattern(unsigned char *buf, unsigned size, unsigned seq) {
  for (size_t i = 0; i < size; i++) buf[i] = pattern_byte(seq, i);
}

static void verify_pattern(const unsigned char *buf, unsigned size, unsigned seq) {
  for (size_t i = 0; i < size; i++)
    if (buf[i] != pattern_byte(seq, i))
      die("message %u, byte %zu: got 0x%02x, expected 0x%02x", seq, i, buf[i], pattern_byte(seq, i));
}

/* ---- device and resources ---- */

static struct ibv_context *open_device(const char *name) {
  int count;
  struct ibv_device **list = ibv_get_device_list(&count);
  if (list == NULL || count == 0) die("no RDMA device found (run under 'softrdma run --')");
  struct ibv_device *chosen = NULL;
  for (int i = 0; i < count && chosen == NULL; i++)
    if (name == NULL || strcmp(ibv_get_device_name(list[i]), name) == 0) chosen = list[i];
  if (chosen == NULL) die("no RDMA device named '%s'", name);
  struct ibv_context *ctx = ibv_open_device(chosen);
  if (ctx == NULL) die("cannot open %s: %s", ibv_get_device_name(chosen), strerror(errno));
  ibv_free_device_list(list); /* an open context keeps its device */
  return ctx;
}

static struct ibv_mr *register_buffer(struct ibv_pd *pd, unsigned char **buf, unsigned size, unsigned access) {
  *buf = calloc(1, size);
  if (*buf == NULL) die("out of memory for a %u-byte buffer", size);
  struct ibv_mr *mr = ibv_reg_mr(pd, *buf, size, access);
  if (mr == NULL) die("ibv_reg_mr: %s", strerror(errno));
  return mr;
}

static struct ibv_qp *create_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq) {
  struct ibv_qp_init_attr attr = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = QUEUE_DEPTH, .max_recv_wr = QUEUE_DEPTH, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  struct ibv_qp *qp = ibv_create_qp(pd, &attr);
  if (qp == NULL) die("ibv_create_qp: %s", strerror(errno));
  return qp;
}

static void create_endpoint(struct endpoint *ep, const struct options *o) {
  memset(ep, 0, sizeof *ep);
  ep->peer_fd = -1;
  ep->ctx = open_device(o->device);
  ep->pd = ibv_alloc_pd(ep->ctx);
  if (ep->pd == NULL) die("ibv_alloc_pd: %s", strerror(errno));
  /* A completion channel lets us sleep in poll() with a deadline instead of spinning, which
   * matters on small CI runners where both ends and their devices share two cores. */
  ep->channel = ibv_create_comp_channel(ep->ctx);
  if (ep->channel == NULL) die("ibv_create_comp_channel: %s", strerror(errno));
  ep->cq = ibv_create_cq(ep->ctx, 2 * QUEUE_DEPTH, NULL, ep->channel, 0);
  if (ep->cq == NULL) die("ibv_create_cq: %s", strerror(errno));
  ep->qp = create_rc_qp(ep->pd, ep->cq);
  ep->send_mr = register_buffer(ep->pd, &ep->send_buf, o->size, IBV_ACCESS_LOCAL_WRITE);
  ep->recv_mr = register_buffer(ep->pd, &ep->recv_buf, o->size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

static void destroy_endpoint(struct endpoint *ep) {
  /* Children before parents: a QP before its CQ, a CQ before its channel, all before the PD. */
  if (ibv_destroy_qp(ep->qp)) die("ibv_destroy_qp failed");
  if (ibv_dereg_mr(ep->send_mr) || ibv_dereg_mr(ep->recv_mr)) die("ibv_dereg_mr failed");
  if (ibv_destroy_cq(ep->cq)) die("ibv_destroy_cq failed");
  if (ibv_destroy_comp_channel(ep->channel)) die("ibv_destroy_comp_channel failed");
  if (ibv_dealloc_pd(ep->pd)) die("ibv_dealloc_pd failed");
  if (ibv_close_device(ep->ctx)) die("ibv_close_device failed");
  free(ep->send_buf);
  free(ep->recv_buf);
}

static struct peer_info describe_local(const struct endpoint *ep, const struct options *o) {
  struct peer_info me = {.qpn = ep->qp->qp_num,
                         .psn = (uint32_t)lrand48() & 0xffffff, /* random, as packets of an old run must not fit */
                         .rkey = ep->recv_mr->rkey,
                         .addr = (uintptr_t)ep->recv_buf,
                         .iters = o->iters,
                         .size = o->size,
                         .op = o->op};
  struct ibv_port_attr port;
  if (ibv_query_port(ep->ctx, IB_PORT, &port)) die("ibv_query_port: %s", strerror(errno));
  if (port.state != IBV_PORT_ACTIVE) die("port %d is not active", IB_PORT);
  me.mtu = port.active_mtu;
  if (ibv_query_gid(ep->ctx, IB_PORT, o->gid_index, &me.gid))
    die("cannot read GID index %d: %s (ibv_devinfo -v lists the table)", o->gid_index, strerror(errno));
  static const union ibv_gid zero;
  if (memcmp(&me.gid, &zero, sizeof zero) == 0)
    die("GID index %d is empty (ibv_devinfo -v lists the table)", o->gid_index);
  return me;
}

/* ---- the TCP exchange ---- */

static struct sockaddr_in tcp_address(const struct options *o) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  if (inet_pton(AF_INET, o->address, &sa.sin_addr) != 1) die("'%s' is not an IPv4 address", o->address);
  return sa;
}

static int tcp_accept_one(const struct options *o) {
  struct sockaddr_in sa = tcp_address(o);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  /* Lets the next test run reuse the port while this run's connection sits in TIME_WAIT. */
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener, (struct sockaddr *)&sa, sizeof sa) || listen(listener, 1))
    die("cannot listen on %s:%u: %s", o->address, o->port, strerror(errno));
  /* Scripts wait for this line before starting the client. */
  printf("verbs_echo: server: listening on %s:%u\n", o->address, o->port);
  fflush(stdout);
  struct pollfd pfd = {.fd = listener, .events = POLLIN};
  if (poll(&pfd, 1, o->timeout_ms) != 1) die("no client connected within %d s", o->timeout_ms / 1000);
  int fd = accept(listener, NULL, NULL);
  if (fd < 0) die("accept: %s", strerror(errno));
  close(listener);
  return fd;
}

static int tcp_connect(const struct options *o) {
  struct sockaddr_in sa = tcp_address(o);
  /* Retry for a while: a server started at the same moment may not be listening yet. */
  for (int waited_ms = 0;; waited_ms += 100) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    int err = errno;
    close(fd);
    if (err != ECONNREFUSED || waited_ms >= o->timeout_ms)
      die("cannot connect to %s:%u: %s", o->address, o->port, strerror(err));
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
  }
}

static void write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("TCP write: %s", strerror(errno));
    buf += n;
    len -= (size_t)n;
  }
}

/* Reads one '\n'-terminated line, waiting at most timeout_ms for each byte. */
static void read_line(int fd, char *buf, size_t max, int timeout_ms) {
  for (size_t len = 0; len + 1 < max; len++) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) != 1) die("the peer sent nothing for %d s", timeout_ms / 1000);
    ssize_t n = read(fd, &buf[len], 1);
    if (n <= 0) die("the peer closed the TCP connection early");
    if (buf[len] == '\n') {
      buf[len] = '\0';
      return;
    }
  }
  die("the peer sent a line longer than %zu bytes", max);
}

static void gid_to_hex(const union ibv_gid *gid, char out[33]) {
  for (int i = 0; i < 16; i++) snprintf(&out[2 * i], 3, "%02x", gid->raw[i]);
}

static bool hex_to_gid(const char *hex, union ibv_gid *gid) {
  for (int i = 0; i < 16; i++) {
    unsigned byte;
    if (sscanf(&hex[2 * i], "%2x", &byte) != 1) return false;
    gid->raw[i] = (uint8_t)byte;
  }
  return true;
}

/* One text line each way: easy to read in a packet capture, and free of byte-order traps. */
static struct peer_info exchange_info(int fd, const struct peer_info *me, int timeout_ms) {
  char gid[33], line[INFO_LINE_MAX];
  gid_to_hex(&me->gid, gid);
  int len = snprintf(line, sizeof line,
                     "qpn=%" PRIu32 " psn=%" PRIu32 " rkey=%" PRIu32 " addr=%" PRIu64
                     " gid=%s mtu=%d iters=%u size=%u op=%d\n",
                     me->qpn, me->psn, me->rkey, me->addr, gid, (int)me->mtu, me->iters, me->size, (int)me->op);
  write_all(fd, line, (size_t)len);

  read_line(fd, line, sizeof line, timeout_ms);
  struct peer_info peer;
  int mtu, op;
  if (sscanf(line,
             "qpn=%" SCNu32 " psn=%" SCNu32 " rkey=%" SCNu32 " addr=%" SCNu64 " gid=%32s mtu=%d iters=%u size=%u op=%d",
             &peer.qpn, &peer.psn, &peer.rkey, &peer.addr, gid, &mtu, &peer.iters, &peer.size, &op) != 9 ||
      !hex_to_gid(gid, &peer.gid))
    die("the peer's QP information is garbled: '%s'", line);
  peer.mtu = (enum ibv_mtu)mtu;
  peer.op = (enum operation)op;
  return peer;
}

static void check_same_test(const struct peer_info *me, const struct peer_info *peer) {
  if (me->iters != peer->iters || me->size != peer->size || me->op != peer->op)
    die("the peer runs -n %u -S %u -o %s, this side -n %u -S %u -o %s", peer->iters, peer->size, op_name(peer->op),
        me->iters, me->size, op_name(me->op));
}

/* Writes WORD and waits for the peer's. At the start: both QPs are ready before the first
 * message. At the end: neither side tears its QP down while the other may still wait for an
 * ACK from it (a lost last ACK would otherwise make the peer retry into the void). */
static void tcp_barrier(int fd, const char *word, int timeout_ms) {
  char line[16];
  write_all(fd, word, strlen(word));
  write_all(fd, "\n", 1);
  read_line(fd, line, sizeof line, timeout_ms);
  if (strcmp(line, word) != 0) die("the peer sent '%s' instead of '%s'", line, word);
}

/* ---- connecting the QP: RESET -> INIT -> RTR -> RTS ---- */

static void move_to_init(struct ibv_qp *qp) {
  struct ibv_qp_attr attr = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = IB_PORT, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("moving the QP to INIT: %s", strerror(errno));
}

static void move_to_rtr(struct ibv_qp *qp, const struct peer_info *me, const struct peer_info *peer, int gid_index) {
  /* RoCE has no LIDs: the peer is addressed by its GID in a global route header. */
  struct ibv_qp_attr attr = {
      .qp_state = IBV_QPS_RTR,
      .path_mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu,
      .dest_qp_num = peer->qpn,
      .rq_psn = peer->psn,
      .max_dest_rd_atomic = 1,
      .min_rnr_timer = 12, /* 0.64 ms before an RNR-NAKed request is retried */
      .ah_attr = {.is_global = 1,
                  .grh = {.dgid = peer->gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 64},
                  .port_num = IB_PORT},
  };
  if (ibv_modify_qp(qp, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("moving the QP to RTR: %s", strerror(errno));
}

static void move_to_rts(struct ibv_qp *qp, const struct peer_info *me) {
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_RTS,
                             .sq_psn = me->psn,
                             .timeout = 14, /* 4.096 us * 2^14 = 67 ms before a retransmission */
                             .retry_cnt = 7,
                             .rnr_retry = 7, /* 7: retry RNR NAKs for ever */
                             .max_rd_atomic = 1};
  if (ibv_modify_qp(qp, &attr,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("moving the QP to RTS: %s", strerror(errno));
}

/* ---- posting work and waiting for completions ---- */

/* The receive buffer is zeroed first, so bytes left from an earlier message cannot pass. */
static void post_receive(struct endpoint *ep, unsigned size) {
  memset(ep->recv_buf, 0, size);
  struct ibv_sge sge = {.addr = (uintptr_t)ep->recv_buf, .length = size, .lkey = ep->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(ep->qp, &wr, &bad)) die("ibv_post_recv: %s", strerror(errno));
}

/* Sends send_buf as message seq: a SEND into the peer's posted receive, or a WRITE into its
 * receive buffer; either way the immediate data raises a receive completion on the peer. */
static void post_message(struct endpoint *ep, const struct peer_info *peer, unsigned size, unsigned seq) {
  struct ibv_sge sge = {.addr = (uintptr_t)ep->send_buf, .length = size, .lkey = ep->send_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = WR_SEND,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = peer->op == OP_SEND ? IBV_WR_SEND_WITH_IMM : IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(seq)},
                     *bad;
  if (peer->op == OP_WRITE) {
    wr.wr.rdma.remote_addr = peer->addr;
    wr.wr.rdma.rkey = peer->rkey;
  }
  if (ibv_post_send(ep->qp, &wr, &bad)) die("ibv_post_send: %s", strerror(errno));
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Takes one completion from the CQ, if there is one, into its kind's slot. */
static bool poll_one(struct endpoint *ep) {
  struct ibv_wc wc;
  int n = ibv_poll_cq(ep->cq, 1, &wc);
  if (n < 0) die("ibv_poll_cq failed");
  if (n == 0) return false;
  if (wc.wr_id == WR_SEND) {
    ep->send_wc = wc;
    ep->have_send_wc = true;
  } else {
    ep->recv_wc = wc;
    ep->have_recv_wc = true;
  }
  return true;
}

/* Called when the peer's TCP connection is readable: either the peer is gone, or it has
 * finished and sent "done", which the final barrier reads, so the socket is watched no more. */
static void check_peer_alive(struct endpoint *ep) {
  char byte;
  ssize_t n = recv(ep->peer_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    die("the peer closed its TCP connection: it has exited (its own output says why)");
  if (n > 0) ep->peer_fd = -1;
}

/* Sleeps on the completion channel (and the peer's connection) until the CQ may hold
 * something, or returns at the deadline. */
static void sleep_for_completion(struct endpoint *ep, long long deadline_ms) {
  if (ibv_req_notify_cq(ep->cq, 0)) die("ibv_req_notify_cq failed");
  if (poll_one(ep)) return; /* one arrived before the notification was armed */
  long long left = deadline_ms - now_ms();
  struct pollfd pfd[2] = {{.fd = ep->channel->fd, .events = POLLIN}, {.fd = ep->peer_fd, .events = POLLIN}};
  if (left <= 0 || poll(pfd, 2, (int)left) < 1) return; /* the caller sees the deadline pass */
  if (pfd[1].revents != 0) check_peer_alive(ep);
  if (pfd[0].revents == 0) return;
  struct ibv_cq *cq;
  void *cq_context;
  if (ibv_get_cq_event(ep->channel, &cq, &cq_context)) die("ibv_get_cq_event failed");
  ibv_ack_cq_events(cq, 1);
}

/* Waits for the next completion of one kind (WR_RECV or WR_SEND); one of the other kind that
 * arrives first stays in its slot for a later call. */
static struct ibv_wc wait_for(struct endpoint *ep, uint64_t wr_id, int timeout_ms) {
  long long deadline = now_ms() + timeout_ms;
  for (;;) {
    bool *have = wr_id == WR_SEND ? &ep->have_send_wc : &ep->have_recv_wc;
    if (*have) {
      *have = false;
      return wr_id == WR_SEND ? ep->send_wc : ep->recv_wc;
    }
    if (poll_one(ep)) continue;
    if (now_ms() >= deadline)
      die("no %s completion within %d s", wr_id == WR_SEND ? "send" : "receive", timeout_ms / 1000);
    sleep_for_completion(ep, deadline);
  }
}

static void wait_for_send(struct endpoint *ep, unsigned seq, int timeout_ms) {
  struct ibv_wc wc = wait_for(ep, WR_SEND, timeout_ms);
  if (wc.status != IBV_WC_SUCCESS) die("message %u: send failed: %s", seq, ibv_wc_status_str(wc.status));
}

/* Waits for message seq to arrive and checks its completion and every byte. */
static void wait_for_message(struct endpoint *ep, const struct peer_info *peer, unsigned seq, int timeout_ms) {
  struct ibv_wc wc = wait_for(ep, WR_RECV, timeout_ms);
  if (wc.status != IBV_WC_SUCCESS) die("message %u: receive failed: %s", seq, ibv_wc_status_str(wc.status));
  enum ibv_wc_opcode expected = peer->op == OP_SEND ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
  if (wc.opcode != expected) die("message %u: completion opcode %d, expected %d", seq, wc.opcode, expected);
  if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != seq)
    die("message %u: immediate data is %u, not the message number", seq, ntohl(wc.imm_data));
  /* A WRITE's length is not reported by every device; a SEND's is. */
  if (peer->op == OP_SEND && wc.byte_len != peer->size)
    die("message %u: %u bytes arrived, expected %u", seq, wc.byte_len, peer->size);
  verify_pattern(ep->recv_buf, peer->size, seq);
}

/* ---- the two roles ---- */

static void run_client(struct endpoint *ep, const struct peer_info *peer, int timeout_ms) {
  for (unsigned seq = 0; seq < peer->iters; seq++) {
    post_receive(ep, peer->size); /* before sending, so the echo always finds it */
    fill_pattern(ep->send_buf, peer->size, seq);
    post_message(ep, peer, peer->size, seq);
    wait_for_send(ep, seq, timeout_ms);
    wait_for_message(ep, peer, seq, timeout_ms);
  }
}

static void run_server(struct endpoint *ep, const struct peer_info *peer, int timeout_ms) {
  for (unsigned seq = 0; seq < peer->iters; seq++) {
    wait_for_message(ep, peer, seq, timeout_ms);
    /* Echo from a copy: the receive buffer is cleared and re-posted before the echo goes out,
     * so the client's next message can never land in bytes still being sent. */
    memcpy(ep->send_buf, ep->recv_buf, peer->size);
    if (seq + 1 < peer->iters) post_receive(ep, peer->size);
    post_message(ep, peer, peer->size, seq);
    wait_for_send(ep, seq, timeout_ms);
  }
}

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv);
  role = o.server ? "server" : "client";
  srand48((long)getpid() ^ (long)time(NULL));

  struct endpoint ep;
  create_endpoint(&ep, &o);
  struct peer_info me = describe_local(&ep, &o);
  int fd = o.server ? tcp_accept_one(&o) : tcp_connect(&o);
  ep.peer_fd = fd;
  struct peer_info peer = exchange_info(fd, &me, o.timeout_ms);
  check_same_test(&me, &peer);

  move_to_init(ep.qp);
  /* The server's first receive must be posted before the client can send. */
  if (o.server) post_receive(&ep, o.size);
  move_to_rtr(ep.qp, &me, &peer, o.gid_index);
  move_to_rts(ep.qp, &me);
  tcp_barrier(fd, "ready", o.timeout_ms);

  long long start = now_ms();
  if (o.server)
    run_server(&ep, &peer, o.timeout_ms);
  else
    run_client(&ep, &peer, o.timeout_ms);
  long long elapsed = now_ms() - start;
  tcp_barrier(fd, "done", o.timeout_ms);

  close(fd);
  destroy_endpoint(&ep);
  printf("verbs_echo: %s: %u messages of %u bytes by %s, every byte checked (%lld ms)\n", role, o.iters, o.size,
         op_name(o.op), elapsed);
  return 0;
}
