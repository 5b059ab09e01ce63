"""The commands' words when the server's acl_users refuses their user, as OpenPBS 23.06's
(checked as a user the list does not name): the job commands name each job, by its full
id; pbs_rstat says so and exits 0; pbsnodes exits 1, naming a node asked for by name."""

from __future__ import annotations


def test_commands_refused_by_the_servers_acl_users_answer_as_openpbs(engine, attacker):
    job = attacker.pbs(engine, "qsub", "-h", "--", "/bin/true").stdout.strip()
    seq = job.split(".")[0]
    host = job.split(".", 1)[1]
    for text in ("set server acl_users=root", "set server acl_user_enable=true"):
        engine.pbs("qmgr", "-c", text, check=True)
    refused = "Unauthorized Request "
    for argv, status, line in (
            (("qhold", job), 159, f"qhold: {refused} {job}"),
            (("qrls", seq), 159, f"qrls: {refused} {job}"),
            (("qhold", "99999", seq), 159, f"qhold: {refused} 99999.{host}\n"
                                           f"qhold: {refused} {job}"),
            (("qalter", "-N", "x", job), 159, f"qalter: {refused} {job}"),
            (("qsig", job), 159, f"qsig: {refused} {job}"),
            (("qmove", "workq", job), 159, f"qmove: {refused} {job}"),
            (("qdel", job), 159, f"qdel: {refused}"),
            (("pbs_rstat",), 0, f"pbs_rstat: {refused}"),
            (("pbs_rstat", "-f"), 0, f"pbs_rstat: {refused}"),
            (("pbsnodes", "-a"), 1, f"pbsnodes: {refused}"),
            (("pbsnodes", "-av"), 1, f"pbsnodes: {refused}"),
            (("pbsnodes", "-l"), 1, f"pbsnodes: {refused}"),
            (("pbsnodes", host), 1, f"Node: {host},  Error: {refused}")):
        done = attacker.pbs(engine, *argv)
        assert (done.returncode, done.stdout, done.stderr) == (status, "", line + "\n"), argv
