/*
 * pbsplug's native launcher for one Slurm script (Prolog, Epilog, PrologSlurmctld,
 * EpilogSlurmctld, HealthCheckProgram, SuspendProgram, ResumeProgram, ResumeFailProgram).
 *
 * It does what slurm_program.main does when the host's worker is already running, without
 * starting an interpreter: the script's name, Slurm's environment and the arguments go to
 * the worker's UNIX socket as one marshal dict (only the types marshal's reader needs here:
 * dict, list, str), asking for the "native" answer (slurm_program.native_answer: the exit
 * status and the exact stdout and stderr bytes, length-prefixed); the launcher writes them
 * out and exits with the status.
 *
 * Everything else is the Python program's, unchanged: this process execs it (PBSPLUG_PYTHON,
 * written beside it by 'pbsplug slurm install') before anything is sent when it is not root,
 * when no worker answers on the socket (the Python program starts one), when the Prolog's
 * task worker is not running, and when the environment or the arguments are not plain ASCII
 * or are larger than the bounds below (the Python program decodes them itself), and when
 * the worker resets the connection before any byte of its answer (`unanswered`). Any other
 * failure once the request is sent is one line on stderr and exit status 1, as the Python
 * program's: the event must not run twice, and a job must never run unchecked.
 *
 * The site's own program for the script (PBSPLUG_SITE: the slurm.conf line install replaced;
 * for the Prolog and Epilog a glob pattern's matches, in glob(3)'s order) runs first, as root,
 * with the same environment and arguments and stdin /dev/null, waited for (`run_site`),
 * as slurm_program.run_site does. Its failure goes with the request (the bridge decides
 * what runs); a Python program exec'd after it is told, in SITE_RAN, not to run it again:
 * "<pid> <status> <program>", this process's pid first: the Python program, which keeps the
 * pid across the exec, believes no other. A SITE_RAN in the environment this launcher was
 * started with is removed first thing: the site's programs, the worker's request and the
 * Python program never see it.
 *
 * Built by 'pbsplug slurm install' (cc -O2) with the paths as -D definitions:
 * PBSPLUG_SCRIPT, PBSPLUG_SOCKET, PBSPLUG_TASK_SOCKET ("" when none), PBSPLUG_PYTHON,
 * PBSPLUG_SITE ("" when none). POSIX and libc only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PBSPLUG_SCRIPT
#error "build with -DPBSPLUG_SCRIPT=... (pbsplug slurm install does)"
#endif
#ifndef PBSPLUG_SITE
#define PBSPLUG_SITE ""
#endif
/* slurm_program.SITE_RAN */
#define SITE_RAN "PBSPLUG_SITE_RAN"

/* Found by 'pbsplug slurm uninstall' in the binary: the file is pbsplug's. */
const char pbsplug_mark[] = "written by 'pbsplug slurm install'";

/* Bounds on what this launcher sends itself; past them, the Python program decides. */
#define MAX_ENTRIES 4096          /* environment entries plus arguments */
#define MAX_STRING (1u << 20)     /* one name, value or argument */
#define MAX_REQUEST (16u << 20)   /* the whole request (the worker's own limit is 64 MiB) */
#define MAX_ANSWER (64u << 20)    /* the whole answer */
#define ANSWER_HEAD "PBSPLUG-ANSWER 1 "

static char **saved_argv;

/* The site's programs: whether they ran here, the first failure's status and program. */
static int site_ran, site_status;
static char site_failed[4096];

static void python_program(void)
{
    /* The Python program does all of it, as it did before this launcher existed, but for
     * the site's programs when they ran here. */
    char *const fallback[] = {PBSPLUG_PYTHON, NULL};
    if (site_ran) {
        char ran[sizeof(site_failed) + 48];
        snprintf(ran, sizeof(ran), "%ld %d %s", (long)getpid(), site_status, site_failed);
        setenv(SITE_RAN, ran, 1);
    }
    if (saved_argv != NULL && saved_argv[0] != NULL) {
        saved_argv[0] = PBSPLUG_PYTHON;
        execv(PBSPLUG_PYTHON, saved_argv);
    } else {
        execv(PBSPLUG_PYTHON, fallback);
    }
    fprintf(stderr, "pbsplug %s: cannot run %s: %s\n", PBSPLUG_SCRIPT, PBSPLUG_PYTHON,
            strerror(errno));
    _exit(site_status ? site_status : 1);
}

static void fail(const char *what)
{
    fprintf(stderr, "pbsplug %s: %s\n", PBSPLUG_SCRIPT, what);
    _exit(site_status ? site_status : 1);
}

/* The worker reset the connection (ECONNRESET, EPIPE) before any byte of its answer: one
 * leaving at its idle exit just as it was asked, the request unread. Nothing ran: a
 * worker's child runs the event only once it has read the request to its end, and a
 * connection closed with nothing left unread ends in EOF, not a reset (an EOF with no
 * answer stays a failure). So the Python program does it all, as when no worker answers:
 * worker_client.ask's rule, which asks again once, of a new worker, then runs the events
 * itself. */
static void unanswered(int fd)
{
    close(fd);
    python_program();
}

/* One site program run with this launcher's arguments, stdin /dev/null, waited for: its
 * exit status; 128 + the signal that killed it; 127 when it cannot be run. */
static int run_one(const char *path, char **argv)
{
    size_t n = 1;
    while (argv[n] != NULL)
        n++;
    char **args = calloc(n + 1, sizeof(*args));
    if (args == NULL)
        return 1;
    args[0] = (char *)path;
    for (size_t i = 1; i < n; i++)
        args[i] = argv[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(args);
        fprintf(stderr, "pbsplug %s: cannot start the site's program %s: %s\n",
                PBSPLUG_SCRIPT, path, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null > 0) {
            dup2(null, 0);
            close(null);
        }
        execv(path, args);
        fprintf(stderr, "pbsplug: cannot run the site's program %s: %s\n", path,
                strerror(errno));
        _exit(127);
    }
    free(args);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

static void site_result(int code, const char *path)
{
    if (code != 0 && site_status == 0) {
        site_status = code;
        snprintf(site_failed, sizeof(site_failed), "%s", path);
    }
}

/* The site's programs (slurm_program.run_site's rule): a Prolog's or Epilog's pattern's
 * matches one after the other, the rest after a failure only for the Epilog. */
static void run_site(char **argv)
{
    if (PBSPLUG_SITE[0] == '\0')
        return;
    site_ran = 1;
    int pattern = strcmp(PBSPLUG_SCRIPT, "prolog") == 0 || strcmp(PBSPLUG_SCRIPT, "epilog") == 0;
    if (!pattern || strpbrk(PBSPLUG_SITE, "*?[") == NULL) {
        site_result(run_one(PBSPLUG_SITE, argv), PBSPLUG_SITE);
        return;
    }
    glob_t found;
    int r = glob(PBSPLUG_SITE, 0, NULL, &found);
    if (r == GLOB_NOMATCH)
        return;
    if (r != 0) {
        fprintf(stderr, "pbsplug %s: cannot read the site's pattern %s\n", PBSPLUG_SCRIPT,
                PBSPLUG_SITE);
        site_result(1, PBSPLUG_SITE);
        return;
    }
    for (size_t i = 0; i < found.gl_pathc; i++) {
        site_result(run_one(found.gl_pathv[i], argv), found.gl_pathv[i]);
        if (site_status != 0 && strcmp(PBSPLUG_SCRIPT, "epilog") != 0)
            break;
    }
    globfree(&found);
}

struct buf {
    unsigned char *data;
    size_t len, cap;
};

/* Appends n bytes; 0 when the request would pass MAX_REQUEST (the caller falls back). */
static int put(struct buf *b, const void *src, size_t n)
{
    if (n > MAX_REQUEST || b->len > MAX_REQUEST - n)
        return 0;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *p = realloc(b->data, cap);
        if (p == NULL)
            return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 1;
}

static int put_u32(struct buf *b, uint32_t v)
{
    unsigned char le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
    return put(b, le, 4);
}

/* marshal's str (type 'u': a 4-byte little-endian length, then UTF-8); plain ASCII only, so
 * that it decodes to what the Python program would have (any file system encoding). */
static int put_str(struct buf *b, const char *s, size_t n)
{
    if (n > MAX_STRING)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return put(b, "u", 1) && put_u32(b, (uint32_t)n) && put(b, s, n);
}

static int put_cstr(struct buf *b, const char *s)
{
    size_t n = strnlen(s, (size_t)MAX_STRING + 1);
    return put_str(b, s, n);
}

/* The request slurm_program.main sends, plus "answer": "native"; 0 to fall back. */
static int build_request(struct buf *b, char **argv, char **envp)
{
    size_t count = 0;
    if (!put(b, "{", 1) || !put_cstr(b, "script") || !put_cstr(b, PBSPLUG_SCRIPT))
        return 0;
    if (!put_cstr(b, "env") || !put(b, "{", 1))
        return 0;
    for (char **e = envp; e != NULL && *e != NULL; e++) {
        if (++count > MAX_ENTRIES)
            return 0;
        size_t len = strnlen(*e, (size_t)MAX_STRING + 1);
        if (len > MAX_STRING)
            return 0; /* longer than the request may carry: the Python program's */
        const char *eq = memchr(*e, '=', len);
        if (eq == NULL)
            continue; /* Python's os.environ skips these too */
        size_t klen = (size_t)(eq - *e);
        /* Python keeps the first of two entries with one name, marshal's dict the last:
         * leave such an environment to the Python program. */
        for (char **o = envp; o != e; o++)
            if (strncmp(*o, *e, klen + 1) == 0)
                return 0;
        if (!put_str(b, *e, klen) || !put_str(b, eq + 1, len - klen - 1))
            return 0;
    }
    if (!put(b, "0", 1)) /* the dict's end */
        return 0;
    uint32_t nargs = 0;
    for (char **a = argv + 1; *a != NULL; a++)
        nargs++;
    if (nargs > MAX_ENTRIES || !put_cstr(b, "argv") || !put(b, "[", 1) || !put_u32(b, nargs))
        return 0;
    for (char **a = argv + 1; *a != NULL; a++)
        if (!put_cstr(b, *a))
            return 0;
    if (site_status != 0) { /* marshal's int: 'i', 4 bytes little-endian */
        if (!put_cstr(b, "site_status") || !put(b, "i", 1)
            || !put_u32(b, (uint32_t)site_status) || !put_cstr(b, "site_program")
            || !put_cstr(b, site_failed))
            return 0;
    }
    return put_cstr(b, "answer") && put_cstr(b, "native") && put(b, "0", 1);
}

/* A connected socket to `path`, or -1. */
static int connect_to(const char *path)
{
    struct sockaddr_un addr;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(addr.sun_path))
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    while (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    /* Only a root worker is told anything: a socket someone else planted there is no
     * worker (the Python program, which checks the folder, decides instead). */
    struct ucred peer;
    socklen_t size = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || size != sizeof(peer)
        || peer.uid != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int write_all(int fd, const unsigned char *p, size_t n, int flags)
{
    while (n > 0) {
        ssize_t w = flags >= 0 ? send(fd, p, n, flags) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* A decimal number of at most 10 digits ending at `end`; 0 when it is not one. */
static int number(const unsigned char **p, const unsigned char *end, char stop, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    while (*p < end && **p >= '0' && **p <= '9' && digits < 10) {
        v = v * 10 + (uint64_t)(**p - '0');
        (*p)++;
        digits++;
    }
    if (digits == 0 || *p >= end || **p != stop)
        return 0;
    (*p)++;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    (void)argc;
    saved_argv = argv;
    /* Only this run's hand-over (python_program) says the site's programs ran. */
    unsetenv(SITE_RAN);
    /* slurmd and slurmctld start their scripts with signals blocked: the Python program (or
     * a worker it starts) needs them, as it would have had them. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* slurmctld runs the power programs with every fd closed: each of stdin, stdout and
     * stderr that is closed is opened on /dev/null, so that the worker's socket does not
     * take its number (the answer's output written into the socket), nor the Python
     * program, if execed, start with them closed (slurm_program._closed_stdio). */
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) {
            dup2(null, fd);
            close(null);
        }
    }

    if (geteuid() != 0 || PBSPLUG_SOCKET[0] == '\0' || argv == NULL || argv[0] == NULL)
        python_program();
    run_site(argv);
    struct buf req = {0};
    if (!build_request(&req, argv, environ))
        python_program();
    if (PBSPLUG_TASK_SOCKET[0] != '\0') { /* the Prolog: the task worker must be running */
        int task = connect_to(PBSPLUG_TASK_SOCKET);
        if (task < 0)
            python_program(); /* which starts it */
        close(task);
    }
    int fd = connect_to(PBSPLUG_SOCKET);
    if (fd < 0)
        python_program(); /* which starts the worker */

    /* Sent: from here on, no fallback (the worker may be running the event), but for a
     * reset before any answer (`unanswered`). */
    if (!write_all(fd, req.data, req.len, MSG_NOSIGNAL) || shutdown(fd, SHUT_WR) != 0) {
        if (errno == ECONNRESET || errno == EPIPE)
            unanswered(fd);
        fail("the request did not reach the worker");
    }
    free(req.data);
    struct buf ans = {0};
    size_t cap = 65536;
    ans.data = malloc(cap);
    if (ans.data == NULL)
        fail("out of memory");
    ans.cap = cap;
    for (;;) {
        if (ans.len == ans.cap) {
            if (ans.cap >= MAX_ANSWER)
                fail("the worker's answer is too large");
            unsigned char *p = realloc(ans.data, ans.cap * 2);
            if (p == NULL)
                fail("out of memory");
            ans.data = p;
            ans.cap *= 2;
        }
        ssize_t r = read(fd, ans.data + ans.len, ans.cap - ans.len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (ans.len == 0 && (errno == ECONNRESET || errno == EPIPE))
                unanswered(fd);
            fail("the worker's answer could not be read");
        }
        if (r == 0)
            break;
        ans.len += (size_t)r;
    }
    close(fd);
    if (ans.len == 0) /* the event's process was killed at its deadline, or crashed */
        fail("the worker's process ended without an answer");

    /* "PBSPLUG-ANSWER 1 <status> <stdout bytes> <stderr bytes>\n", then both, exactly. */
    const unsigned char *p = ans.data, *end = ans.data + ans.len;
    size_t head = sizeof(ANSWER_HEAD) - 1;
    uint64_t status, out_len, err_len;
    if (ans.len < head || memcmp(p, ANSWER_HEAD, head) != 0)
        fail("the worker's answer is not one this launcher reads");
    p += head;
    if (!number(&p, end, ' ', &status) || !number(&p, end, ' ', &out_len)
        || !number(&p, end, '\n', &err_len) || status > 255
        || out_len > (uint64_t)(end - p) || err_len != (uint64_t)(end - p) - out_len)
        fail("the worker's answer is not one this launcher reads");

    signal(SIGPIPE, SIG_IGN); /* a closed stdout is a failed write, as in Python */
    int code = (int)status;
    if (!write_all(STDOUT_FILENO, p, (size_t)out_len, -1))
        code = code ? code : 1;
    if (!write_all(STDERR_FILENO, p + out_len, (size_t)err_len, -1))
        code = code ? code : 1;
    _exit(site_status ? site_status : code); /* (slurm_program.main's rule) */
}
