"""The `chatcli` entry point: parse the command line, then hand over to one front end."""

from __future__ import annotations

import errno
import sys

from chatcli import __version__

USAGE_HINT = "see chatcli --help"
_END_NOW = False  # set by a one-shot turn: see run()


def run() -> None:
    """The `chatcli` command (and `python -m chatcli`): main(), then the process ends. After a
    one-shot turn it ends as the interpreter would, non-daemon threads joined, exit handlers
    run and output flushed, but without then freeing every object it holds one by one: after a
    turn on a 100,000-message session that took about 60 ms, a tenth of the whole turn. What
    a turn writes is durable before main() returns (fsync'd appends and atomic writes), so
    nothing is left for the objects' finalizers but memory the system takes back at once."""
    code = main()
    if _END_NOW and sys.getprofile() is None and sys.gettrace() is None:  # (a profiler writes its report at exit)
        _end_now(code)
    raise SystemExit(code)


def _end_now(code: int) -> None:
    import atexit
    import os
    import threading

    try:
        shutdown = getattr(threading, "_shutdown", None)  # what the interpreter runs first at exit
        if shutdown is not None:
            shutdown()  # non-daemon threads joined
        atexit._run_exitfuncs()
    except KeyboardInterrupt:  # Ctrl-C while they end: as at any exit, the rest is not waited for
        code = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # (`>&-`)
                stream.flush()
        except KeyboardInterrupt:
            code = 130
        except BrokenPipeError:  # the reader went away (`| head`): the rest was not wanted
            code = code or 141
        except (OSError, ValueError) as exc:  # a full disk: said, where the interpreter said it too
            if stream is sys.stdout:
                _unwritable(exc)
                code = code or 120
                try:
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
    os._exit(code)


def _parser_class():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one line, exit code 2, no usage dump
            sys.stderr.write(f"chatcli: error: {message} ({USAGE_HINT})\n")
            raise SystemExit(2)

    return Parser


def build_parser():
    import argparse

    parser = _parser_class()(
        prog="chatcli",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the commands' table below, as laid out
        description="Chat with large language models from the terminal. With no -p and no piped\n"
        "input, starts the interactive REPL.",
        epilog="Provider: --provider, else LLM_PROVIDER, else the first of OPENAI_API_KEY /\n"
        "ANTHROPIC_API_KEY that is set, else the offline local model.",
    )
    parser.add_argument("-p", "--prompt", metavar="TEXT", help="ask once, print the answer and exit "
                        "(text piped on stdin is appended)")
    parser.add_argument("--provider", metavar="NAME", help="openai, anthropic, ollama or local")
    parser.add_argument("--model", metavar="NAME", help="model name (a .gguf path for the local provider)")
    parser.add_argument("--timeout", metavar="SECONDS", type=float, help="network timeout (default 120)")
    parser.add_argument("-c", "--continue", dest="resume", action="store_true",
                        help="resume the most recent session")
    parser.add_argument("--session", metavar="NAME", help="attach to session NAME at start (created when "
                        "missing); with -p the turn is written to it")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--agent", dest="mode", action="store_const", const="agent", default="chat",
                       help="agent mode: the model may read files here and run shell commands, each asking first")
    modes.add_argument("--coder", dest="mode", action="store_const", const="coder",
                       help="coder mode: agent mode plus file writes and edits, each diff asking first")
    parser.add_argument("--yes", action="store_true", help="approve every shell command and file write "
                        "without asking (with --agent/--coder; for scripts)")
    parser.add_argument("--raw", action="store_true", help="print answers as plain text, no Markdown rendering")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument("--version", action="version", version=f"chatcli {__version__}")
    parser.epilog += "\n\ncommands (each has --help):\n" + "\n".join(
        f"  chatcli {usage:<17} {what}" for usage, what in COMMANDS)
    return parser


# Every command beside the chat itself, for `chatcli --help` (each parses its own arguments).
COMMANDS = (
    ("session ACTION", "list, show, search, export, transcript, delete, fork"),
    ("storage [ACTION]", "what chatcli keeps; prune, rekey, migrate --to"),
    ("import SOURCE", "another tool's conversations as sessions"),
    ("doctor", "what is set up, and what is wrong"),
    ("mcp-server", "an MCP server on stdio, for MCP clients"),
    ("acp", "an agent for editors (Agent Client Protocol)"),
    ("gateway", "answer chats: Telegram, Slack, WhatsApp, a webhook"),
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if sys.stderr is None:  # closed by the caller (`2>&-`): what would go there goes nowhere
        sys.stderr = _null()
    if argv[:1] == ["--debug"] and argv[1:2] and argv[1] in ("session", "storage", "import", *_SERVERS):
        argv = [argv[1], "--debug", *argv[2:]]  # `chatcli --debug storage …`: the subcommand's own --debug
    if argv == ["--version"]:  # the common case, answered without loading argparse
        print(f"chatcli {__version__}")
        return 0
    if sys.stdout is None and argv[:1] in (["session"], ["storage"], ["import"], ["doctor"]):
        sys.stdout = _null()  # closed by the caller (`>&-`): the output goes nowhere
    if argv == ["session", "list"]:  # the common case, answered from its saved rendering when it holds
        from chatcli.cli.quick_list import run as quick_list

        try:
            code = quick_list()
        except BrokenPipeError:
            _silence_stdout()
            return 141
        except OSError as exc:  # its output could not be written (a full disk)
            if exc.errno not in _UNWRITABLE:
                raise
            return _unwritable(exc)
        if code is not None:
            return code
    words = argv[2:] if argv[:2] == ["session", "search"] else []
    if words and not any(word.startswith("-") for word in words):
        from chatcli.cli.quick_search import run as quick_search

        try:  # an index up to date answers without the rest of chatcli
            code = quick_search(words)
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            _silence_stdout()
            return 141
        except OSError as exc:
            if exc.errno not in _UNWRITABLE:
                raise
            return _unwritable(exc)
        if code is not None:
            return code
        # Words alone: the namespace the parser would make, without loading argparse (which
        # imports shutil, gettext and locale: a tenth of a search's whole time).
        from types import SimpleNamespace

        args = SimpleNamespace(action="search", query=words, json=False, debug=False)
        runner = _run_session
    elif argv and argv[0] in ("session", "storage"):
        # --debug (tracebacks on errors) anywhere among the words, or before the subcommand
        debug = "--debug" in argv
        words = [word for word in argv[1:] if word != "--debug"]
        if argv[0] == "session":
            from chatcli.cli.session_cli import build_parser as session_parser

            args, runner = session_parser(_parser_class()).parse_args(words), _run_session
        else:
            from chatcli.cli.storage_cli import build_parser as storage_parser

            args, runner = storage_parser(_parser_class()).parse_args(words), _run_storage
        args.debug = debug
    elif argv and argv[0] == "import":
        from chatcli.cli.import_cli import build_parser as import_parser

        args = import_parser(_parser_class()).parse_args(argv[1:])
        runner = _run_import
    elif argv and argv[0] in _SERVERS:
        args, runner = _server_args(argv[0], argv[1:])
    else:
        args = build_parser().parse_args(argv)
        runner = _run
    if sys.stdout is None:  # closed by the caller (`>&-`)
        if runner in (_run_mcp, _run_acp, _run_gateway) or (runner is _run and not _oneshot(args)):
            sys.stderr.write(f"chatcli: error: standard output is closed: {'the REPL' if runner is _run else 'this server'} "
                             "needs it\n")
            return 2
        sys.stdout = _null()  # a command's output goes nowhere; a one-shot's turn is still recorded
    try:
        return runner(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in _UNWRITABLE and not args.debug:
            where = f": {exc.filename}" if exc.filename else ""
            sys.stderr.write(f"chatcli: error: {exc.strerror or exc}{where}\n")
            _silence_stdout()  # (stdout may be what is full: not written again at exit)
            return 1
        from chatcli.core.errors import ChatcliError

        if args.debug:
            import traceback

            traceback.print_exc()
        if isinstance(exc, ChatcliError):
            sys.stderr.write(f"chatcli: error: {exc}\n")
            return exc.exit_code
        if not args.debug:
            sys.stderr.write(f"chatcli: internal error: {type(exc).__name__}: {exc} (run with --debug for details)\n")
        return 1


def _settings(check_key: bool = True, **flags):
    from chatcli.config.settings import Settings

    settings = Settings.load(**flags)
    for warning in settings.warnings:
        sys.stderr.write(f"chatcli: warning: {warning}\n")
    if check_key:
        from chatcli.store.home import Home

        Home.of(settings).check_key()  # a wrong or missing key stops here
    return settings


def _run(args) -> int:
    settings = _settings(provider=args.provider, model=args.model, timeout=args.timeout, raw=args.raw,
                         debug=args.debug)
    if args.resume and args.session:
        from chatcli.core.errors import UsageError

        raise UsageError("--continue and --session NAME cannot be used together")
    if args.session is not None:
        from chatcli.core.names import validate_user_target

        validate_user_target(args.session)  # an empty or bad --session must not silently mean "none"
    if args.yes and args.mode == "chat":
        from chatcli.core.errors import UsageError

        raise UsageError("--yes approves agent work: give it with --agent or --coder")
    start = {"resume": args.resume, "name": args.session}
    if _oneshot(args):
        from chatcli.cli.oneshot import run_oneshot

        # Bytes that are not UTF-8 (a Latin-1 log, say) become U+FFFD rather than failing later.
        piped = None if sys.stdin.isatty() else sys.stdin.buffer.read().decode("utf-8", errors="replace")
        global _END_NOW
        _END_NOW = True
        return run_oneshot(settings, args.prompt, piped, start, mode=args.mode, yes=args.yes)
    from chatcli.repl.app import run_repl

    return run_repl(settings, start, mode=args.mode, yes=args.yes)


def _server_args(name: str, argv: list[str]):
    """The arguments and the runner of a server-like subcommand, from its row of _SERVERS."""
    description, options, runner = _SERVERS[name]
    parser = _parser_class()(prog=f"chatcli {name}", description=description)
    parser.add_argument("--provider", help="provider (default: as for the REPL)")
    parser.add_argument("--model", help="model (default: as for the REPL)")
    parser.add_argument("--debug", action="store_true", help="tracebacks on errors")
    for flag, option in options:
        parser.add_argument(flag, **option)
    return parser.parse_args(argv), runner


def _run_mcp(args) -> int:
    from chatcli.mcp.server import run_mcp_server

    workdir = None
    if args.workdir is not None:
        from pathlib import Path

        from chatcli.core.errors import UsageError

        workdir = Path(args.workdir).expanduser()
        if not workdir.is_dir():
            raise UsageError(f"--workdir {args.workdir}: not a directory")
    return run_mcp_server(_settings(provider=args.provider, model=args.model, debug=args.debug),
                          allow_writes=args.allow_writes, workdir=workdir)


def _run_acp(args) -> int:
    from chatcli.acp.agent import run_acp

    return run_acp(_settings(provider=args.provider, model=args.model, debug=args.debug))


def _run_gateway(args) -> int:
    from chatcli.gateway.daemon import run_gateway

    return run_gateway(_settings(provider=args.provider, model=args.model, debug=args.debug), args.webhook,
                       args.telegram, args.slack, whatsapp=args.whatsapp)


def _run_doctor(args) -> int:
    from chatcli.cli.doctor_cli import run_doctor

    # The key is checked by the doctor itself, as one of its lines.
    return run_doctor(_settings(check_key=False, provider=args.provider, model=args.model, debug=args.debug))


def _run_session(args) -> int:
    from chatcli.cli.session_cli import run_session_command

    return run_session_command(args, _settings)


def _run_import(args) -> int:
    from chatcli.cli.import_cli import run_import_command

    return run_import_command(args, _settings)


def _run_storage(args) -> int:
    from chatcli.cli.storage_cli import run_storage_command

    return run_storage_command(args, _settings)


# The subcommands that take --provider, --model and --debug: description, their own options, runner.
_SERVERS = {
    "mcp-server": (
        "Serve chatcli's conversations and sessions over MCP on stdio (tools ask_chatcli, agent_task and "
        "manage_session; resources chatcli://sessions).",
        (("--allow-writes", {"action": "store_true", "help": "let agent_task run shell commands and write files in "
                             "its directory (without it, its tools only read)"}),
         ("--workdir", {"metavar": "DIR", "help": "the directory agent_task works in (default: the server's working "
                        "directory, which MCP clients often leave at / or your home)"})),
        _run_mcp),
    "gateway": (
        "Answer chat channels from chatcli's sessions: the Conversation Hub (hub.db) behind a signed JSON webhook, "
        "a Telegram bot, a Slack app and a WhatsApp number. Senders must be on CHATCLI_GATEWAY_ALLOW. Settings also come from "
        "$CHATCLI_HOME/gateway.toml (set variables win); with no adapter flag, the adapters it has a table for run.",
        (("--webhook", {"metavar": "HOST:PORT", "help": "serve the webhook adapter there (requests signed with "
                        "CHATCLI_GATEWAY_WEBHOOK_SECRET)"}),
         ("--telegram", {"action": "store_true", "help": "answer the Telegram bot of TELEGRAM_BOT_TOKEN (long "
                         "polling; the telegram extra)"}),
         ("--slack", {"action": "store_true", "help": "answer the Slack app of SLACK_BOT_TOKEN and SLACK_APP_TOKEN "
                      "(Socket Mode; the slack extra)"}),
         ("--whatsapp", {"metavar": "HOST:PORT", "nargs": "?", "const": "", "help": "answer the WhatsApp number "
                         "of WHATSAPP_PHONE_NUMBER_ID (the Cloud API): serve the webhook Meta calls there (default: "
                         "whatsapp.listen in gateway.toml, or 127.0.0.1:8788)"})),
        _run_gateway),
    "doctor": (
        "Check that chatcli can answer: which provider would answer and why, whether CHATCLI_HOME is writable, "
        "whether the local model loads in its worker and answers one token, and how long each took. Exits 1 if "
        "something needed failed.",
        (), _run_doctor),
    "acp": (
        "Run chatcli as an Agent Client Protocol agent on stdio (for editors such as Zed): chat turns, /session "
        "commands in the prompt box, session/load.",
        (), _run_acp),
}


# Errors of a write that no retry mends: the output (or a file) cannot take more.
_UNWRITABLE = (errno.ENOSPC, errno.EDQUOT)


def _unwritable(exc: OSError | ValueError) -> int:
    """One line for output that could not be written (a full disk), instead of a traceback;
    what is left in stdout's buffer is dropped."""
    _silence_stdout()
    try:
        sys.stderr.write(f"chatcli: error: the output could not be written: {getattr(exc, 'strerror', None) or exc}\n")
    except (OSError, ValueError):
        pass
    return 1


def _null():
    import os

    return open(os.devnull, "w", encoding="utf-8")


def _oneshot(args) -> bool:
    """Whether the chat command asks once (-p, or text piped in) rather than starting the REPL."""
    return args.prompt is not None or not sys.stdin.isatty()


def _silence_stdout() -> None:
    from chatcli.cli import silence_stdout

    silence_stdout()
