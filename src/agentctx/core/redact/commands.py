"""Passwords given to command-line tools, read from one table (issue 24, finding 4).

:data:`TABLE` says, for each tool, which option or word carries a secret and how the value follows
it: the next argument (``-w PW``), attached (``-pPW``), after ``=`` (``--password=PW``), as the
part of ``user%PW``/``user:PW`` after a separator, on standard input (``echo PW | sudo -S``,
``<<< PW``, a here-document), as the last or the N-th operand (``htpasswd -b file user PW``,
``net user bob PW``), after a keyword word (``nmcli … password PW``) or in an ``-o`` option list
(``mount -o user=u,password=PW``). :func:`find_commands` is the one engine that reads it: it finds a
tool's name (one pattern, compiled once with the other rules), splits the line around it into
shell words (quotes, escapes, ``\\``-newline continuations, pipes and redirections) and applies the
tool's rows to the words of its command. A tool in command position (the start of a command, after
a pipe, a prompt, a wrapper such as ``sudo``/``env``/``timeout``) gets every form; a tool named
elsewhere in a line (prose: "run zip -P x") gets the option forms only, so that "the net use of" is
not read as ``net use``. A value is not a secret when it is a reference (``$PW``, ``"${PW}"``,
``$(cat f)``), a prompt (``*``, ``-``), empty, or an ``env:``/``file:``/``fd:`` source of a tool
that takes one (openssl's ``-passin``). docs/redaction.md has the table as prose.
"""

from __future__ import annotations

from agentctx.core.redact.rules import MARKER_PATTERN, MAX_LINE, P_PASSWORD, Lazy, wordset

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.redact.rules import Add


class Row:
    """One way a tool takes a secret. ``forms`` (space-separated) say how the value follows:

    ``next`` (the next word after a flag), ``attached`` (``-pVALUE``), ``eq`` (``--flag=VALUE``),
    ``stdin`` (piped from ``echo``/``printf``, a here-string or a here-document), ``last`` (the
    last operand), ``operand`` (the ``nth`` operand after ``sub``), ``keyword`` (the word after one
    of ``flags``), ``opts`` (``flag key=VALUE,…`` for the keys in ``keys``), ``pgpass`` (a
    ``.pgpass`` line in an argument). ``split``: the secret is what follows the first of these
    characters in the value (``user%PW``). ``when``: a flag that must be present (``sudo -S``).
    ``sub``: words that must be among the command's words (``docker login``). ``source``: the
    value may name its source (``pass:PW`` is secret; ``env:X``, ``file:X``, ``fd:N`` are not).

    A plain class, not a NamedTuple: the hook path does not import :mod:`typing`.
    """

    __slots__ = ("flags", "forms", "keys", "nth", "source", "split", "sub", "tools", "when")

    def __init__(
        self,
        tools: str,
        forms: str,
        flags: str = "",
        split: str = "",
        *,
        when: str = "",
        sub: str = "",
        nth: int = 0,
        source: bool = False,
        keys: str = "",
    ) -> None:
        self.tools = tools
        self.forms = forms
        self.flags = flags
        self.split = split
        self.when = when
        self.sub = sub
        self.nth = nth
        self.source = source
        self.keys = keys

    def __repr__(self) -> str:
        return f"Row({self.tools!r}, {self.forms!r}, {self.flags!r})"


_REGISTRY_LOGIN = "docker podman nerdctl buildah skopeo helm oras crane regctl"
_LDAP = (
    "ldapsearch ldapmodify ldapadd ldapdelete ldapmodrdn ldapcompare ldapwhoami ldappasswd "
    "ldapexop ldapurl"
)
_MYSQL = (
    "mysql mysqldump mysqladmin mysqlimport mysqlshow mysqlcheck mysqlpump mysqlbinlog "
    "mariadb mariadb-dump mariadb-admin mariadb-import mariadb-check mariadb-show"
)
_MONGO = (
    "mongosh mongo mongodump mongorestore mongoexport mongoimport mongostat mongotop mongofiles"
)
_NMCLI_KEYS = (
    "password wifi-sec.psk wifi-sec.leap-password wifi-sec.wep-key0 wifi-sec.wep-key1 "
    "wifi-sec.wep-key2 wifi-sec.wep-key3 802-1x.password 802-1x.private-key-password "
    "802-1x.identity-password pppoe.password gsm.password cdma.password vpn.secrets"
)

#: The tools' secret options: (tools, forms, flags, …). One row per way; a tool may have several.
TABLE: tuple[Row, ...] = (
    # -- read from standard input --
    Row("sudo", "stdin", when="-S --stdin"),
    Row("passwd", "stdin", when="--stdin"),
    Row("smbpasswd", "stdin", when="-s"),
    Row("htpasswd", "stdin", when="-i"),
    Row("chpasswd chgpasswd", "stdin", split=":"),  # user:password lines
    Row("cryptsetup", "stdin"),
    Row("gh", "stdin", when="--with-token", sub="auth login"),
    Row(_REGISTRY_LOGIN, "stdin", when="--password-stdin"),
    Row("podman", "stdin", when="--stdin-passwd"),
    Row("gpg gpg2", "stdin", when="--passphrase-fd"),
    Row("openssl", "stdin", when="stdin"),  # -passin stdin
    # -- operands --
    Row("htpasswd", "last", when="-b"),  # htpasswd -b[c] file user PW, htpasswd -nb user PW
    Row("wpa_passphrase", "last"),
    Row("openssl", "last", sub="passwd"),  # openssl passwd -6 PW
    Row("net", "operand", sub="use", nth=2),  # net use [Z:|*] \\srv\share PW /user:NAME
    Row("net", "operand", sub="user", nth=2),  # net user NAME PW [/add]
    Row("rabbitmqctl", "operand", sub="add_user", nth=2),
    Row("rabbitmqctl", "operand", sub="change_password", nth=2),
    Row("sqlplus rman expdp impdp sqlldr", "operand", nth=1, split="/"),  # user/PW@db
    Row("nmcli", "keyword", _NMCLI_KEYS),
    Row("sc", "keyword", "password="),  # sc config svc password= PW
    Row("echo printf", "pgpass"),  # echo 'host:5432:db:user:PW' >> ~/.pgpass
    # -- options --
    Row(_LDAP, "next attached", "-w"),
    Row("ldappasswd", "next attached", "-s -a"),
    Row("zip zipcloak", "next attached eq", "-P --password"),
    Row("unzip funzip", "next attached", "-P"),
    Row("7z 7za 7zr 7zz", "attached", "-p"),
    Row("rar unrar", "attached", "-p -hp"),
    Row(
        "keytool jarsigner",
        "next",
        "-storepass -keypass -srcstorepass -deststorepass -srckeypass -destkeypass -new",
    ),
    Row("apksigner", "next", "--ks-pass --key-pass", source=True),
    Row("sqlcmd bcp osql isql mssql-cli", "next attached", "-P"),
    Row("openssl", "next", "-k -pass -passin -passout -password", source=True),
    Row("ssh-keygen", "next attached", "-N -P"),
    Row("smbclient smbget rpcclient smbcacls smbtree smbmap", "next attached eq", "-U --user", "%"),
    Row("mount mount.cifs", "opts", "-o", keys="password pass passwd"),
    Row(_MYSQL, "attached eq", "-p --password"),  # `mysql -p db`: db is a database, not a password
    Row("sshpass", "next attached", "-p"),
    Row("redis-cli", "next eq", "-a --pass"),
    Row(_MONGO, "next eq", "-p --password"),
    Row(_REGISTRY_LOGIN, "next eq attached", "-p --password", sub="login"),
    Row("curl", "next attached eq", "-u --user -U --proxy-user", ":"),
    Row("curl", "next eq", "--oauth2-bearer --pass"),
    Row("http https xh", "next attached eq", "-a --auth", ":"),  # HTTPie
    Row("wget", "next eq", "--password --http-password --ftp-password --proxy-password"),
    Row("lftp", "next", "-u --user", ","),
    Row("gpg gpg2", "next eq", "--passphrase"),
    Row("ipmitool", "next attached", "-P"),
    Row("xfreerdp wlfreerdp sdl-freerdp", "attached", "/p: /password:"),
    Row("rdesktop", "next attached", "-p"),
    Row("svn", "next eq", "--password"),
    Row("az", "next eq", "-p --password"),
    Row("oc cf", "next eq", "-p --password", sub="login"),
    Row("kubectl oc", "next eq", "--password --token"),
    Row("influx", "next eq", "-password --password"),
    Row("doctl", "next eq", "-t --access-token"),
    Row("twine", "next eq", "-p --password"),
    Row("mosquitto_pub mosquitto_sub mosquitto_rr", "next", "-P --pw"),
    Row("ncftp ncftpput ncftpget ncftpls", "next attached", "-p"),
    Row("snmpwalk snmpget snmpset snmpbulkwalk snmpbulkget snmptrap", "next attached", "-A -X"),
    Row("psexec psexec64", "next", "-p"),
    Row("certutil", "next", "-p"),
    Row("cmdkey", "attached", "/pass:"),
    Row("schtasks", "next", "/rp /p"),
)

#: Words that run the command after them: a tool after one is in command position too. The value
#: words of their options (``sudo -u root``, ``timeout -s KILL 60``) are skipped.
_WRAPPERS = wordset(
    """
    sudo doas env time nohup exec command timeout nice ionice stdbuf xargs watch pkexec run0
    runuser chroot caffeinate unbuffer
    """
)
_WRAPPER_VALUE_FLAGS = wordset("-u -g -h -p -C -D -r -t -U -T -s -k -n -c -o -e -i")
_PROMPTS = frozenset({"$", "#", "%", ">", "❯", "➜", "λ", "PS>"})
#: The redirections whose next word is a file or a delimiter, not an argument.
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "&>", "&>>", "2>", "2>>", ">&", "<&"})
# A shell word (quotes and escapes inside it) or an operator; blanks and \-newlines between them.
_TOKEN = Lazy(
    r"[ \t\r]+|\\\n"
    r"|(?P<op><<<|<<-|&>>|&&|\|\||\|&|;;|<<|>>|>\||<>|&>|>&|<&|\$\(|[|;&()<>`\n])"
    r"|(?P<w>(?:[^\s|;&()<>`'\"\\]++|\\[\s\S]|'[^']*+'?|\"(?:[^\"\\]++|\\[\s\S])*+\"?)++)"
)
_PGPASS_WORD = Lazy(r"[^:\s]{1,253}:(?:\d{1,5}|\*):[^:\s]{1,128}:[^:\s]{1,128}:")
_SPLIT_LINES = Lazy(r"\\n|\n")
_NONE: frozenset[int] = frozenset()
#: Bounds that keep a line of many tool names linear: the tools examined per command, the words
#: after a tool that are read.
MAX_TOOLS = 8
MAX_ARGS = 40
_OPTION = Lazy(r"-[A-Za-z]|--[a-z][a-z\-]*")


def _rows_by_tool() -> dict[str, tuple[Row, ...]]:
    by_tool: dict[str, list[Row]] = {}
    for row in TABLE:
        for tool in row.tools.split():
            by_tool.setdefault(tool, []).append(row)
    return {tool: tuple(rows) for tool, rows in by_tool.items()}


ROWS = _rows_by_tool()
# The tool names, longest first (so that ``mysqldump`` wins over ``mysql``), on the lowercased text;
# the characters around a match are checked in Python (a leading look-behind would be slow).
TOOL_NAME = Lazy(
    "(?:" + "|".join(sorted((t.replace(".", r"\.") for t in ROWS), key=len, reverse=True)) + ")"
)
_NAME_BEFORE = frozenset(" \t\n\r/\\|;&(`'\"$=")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.")


class Word:
    """A shell word: its value (quotes removed), the text index of each value character, and
    the value indices where an expansion starts (``$X``, ``${X}``, ``$(…)``, a backquote); or an
    operator (``|``, ``;``, ``<<<``…) in ``op``."""

    __slots__ = ("end", "expands", "op", "pos", "start", "value")

    def __init__(
        self, value: str, pos: list[int], start: int, end: int, expands: frozenset[int], op: str
    ) -> None:
        self.value = value
        self.pos = pos
        self.start = start
        self.end = end
        self.expands = expands
        self.op = op


def find_commands(text: str, low: str, add: Add) -> None:
    """Report the secrets that :data:`TABLE` says the command lines of ``text`` hold."""
    done = -1  # the end of the last line examined: a line is examined once
    for match in TOOL_NAME.pattern.finditer(low):
        start, end = match.span()
        if start < done or (start > 0 and low[start - 1] not in _NAME_BEFORE):
            continue
        if end < len(low) and low[end] in _NAME_CHARS and not low.startswith(".exe", end):
            continue
        if low.startswith("://", end):
            continue  # http://…: a URL, not HTTPie
        floor = max(0, done, start - MAX_LINE)
        line_start = max(text.rfind("\n", floor, start) + 1, floor)
        line_end = _line_end(text, start)
        words = _split(text, line_start, line_end)
        _examine(text, words, line_end, add)
        done = line_end


def _line_end(text: str, start: int) -> int:
    """The end of the command line at ``start``: its newline, after ``\\``-newline continuations."""
    limit = min(len(text), start + MAX_LINE)
    pos = start
    while True:
        end = text.find("\n", pos, limit)
        if end < 0:
            return limit
        if end > 0 and text[end - 1] == "\\" and (end < 2 or text[end - 2] != "\\"):
            pos = end + 1
            continue
        return end


def _split(text: str, start: int, end: int) -> list[Word]:
    """The shell words and operators of ``text[start:end]``."""
    words: list[Word] = []
    for match in _TOKEN.pattern.finditer(text, start, end):
        op = match.group("op")
        if op:
            words.append(Word("", [], match.start(), match.end(), _NONE, op))
            continue
        raw = match.group("w")
        if raw is None:
            continue  # blanks, a \-newline continuation
        w_start, w_end = match.span()
        if w_end < end and text[w_end] in "<>" and raw.isdigit():
            continue  # the 2 of 2>err
        if not any(c in raw for c in "'\"\\$`"):
            words.append(Word(raw, list(range(w_start, w_end)), w_start, w_end, _NONE, ""))
        else:
            words.append(_unquote(text, w_start, w_end))
    return words


def _unquote(text: str, start: int, end: int) -> Word:
    """A word with quotes, escapes or expansions: its value and where each character came from."""
    value: list[str] = []
    pos: list[int] = []
    expands: set[int] = set()
    i = start
    while i < end:
        char = text[i]
        if char == "\\" and i + 1 < end:
            if text[i + 1] != "\n":
                value.append(text[i + 1])
                pos.append(i + 1)
            i += 2
        elif char in "'\"":
            close = _closing(text, i, end)
            j = i + 1
            while j < close:
                if char == '"' and text[j] == "\\" and j + 1 < close and text[j + 1] in '"\\$`':
                    j += 1
                elif char == '"' and _expansion(text, j):
                    expands.add(len(value))
                value.append(text[j])
                pos.append(j)
                j += 1
            i = close + 1
        else:
            if _expansion(text, i):
                expands.add(len(value))
            value.append(char)
            pos.append(i)
            i += 1
    return Word("".join(value), pos, start, end, frozenset(expands), "")


def _expansion(text: str, i: int) -> bool:
    """An unquoted (or double-quoted) ``$NAME``, ``${``, ``$(`` or a backquote at ``i``."""
    if text[i] == "`":
        return True  # inside double quotes: "`cat f`"
    return text[i] == "$" and i + 1 < len(text) and (text[i + 1].isalnum() or text[i + 1] in "_{(")


def _closing(text: str, quote_at: int, end: int) -> int:
    """Where the quote opened at ``quote_at`` closes (``end`` if it does not)."""
    quote = text[quote_at]
    j = quote_at + 1
    while j < end:
        if text[j] == quote:
            return j
        if quote == '"' and text[j] == "\\":
            j += 1
        j += 1
    return end


def _examine(text: str, words: list[Word], line_end: int, add: Add) -> None:
    """Apply the table to every command of a line (its stages, split at operators)."""
    stages: list[tuple[list[Word], str]] = []  # (words, the operator that ends the stage)
    current: list[Word] = []
    for word in words:
        if word.op in ("|", "|&", ";", "&&", "||", "&", "(", ")", "`", "$(", "\n", ";;"):
            stages.append((current, word.op))
            current = []
        else:
            current.append(word)
    stages.append((current, ""))
    for index, (stage, _) in enumerate(stages):
        previous = stages[index - 1] if index > 0 and stages[index - 1][1] in ("|", "|&") else None
        _stage(text, stage, previous[0] if previous else None, line_end, add)


def _stage(
    text: str, stage: list[Word], fed_by: list[Word] | None, line_end: int, add: Add
) -> None:
    """One command: find its tools (in command position or not) and apply their rows."""
    args = _args(stage)
    commands = _command_positions(args)
    tools = 0
    for index, word in enumerate(args):
        if word.op:
            continue
        rows = ROWS.get(_name(word))
        if rows is None:
            continue
        tools += 1
        if tools > MAX_TOOLS:
            break  # a hostile line of tool names: each is examined in a bounded window
        rest = args[index + 1 : index + 1 + MAX_ARGS]
        at_start = index in commands
        for row in rows:
            _apply(text, row, rest, at_start, stage, fed_by, line_end, add)


def _args(stage: list[Word]) -> list[Word]:
    """The words of a command without redirections and their targets (here-strings kept)."""
    out: list[Word] = []
    skip = False
    for word in stage:
        if skip:
            skip = False
            continue
        if word.op in _REDIRECTS or word.op in ("<<", "<<-"):
            skip = True
            continue
        if word.op == "<<<":
            out.append(word)
            continue
        out.append(word)
    return out


def _command_positions(args: list[Word]) -> set[int]:
    """The indices of the words that run a command: the first (after a prompt) and the word after
    a label ending in ``:`` ("Test failure: cmd", "Bash: cmd"), each with the words after the
    wrappers that follow it (``sudo -u root cmd``)."""
    starts = [0]
    starts.extend(
        i + 1
        for i, word in enumerate(args[:-1])
        if len(word.value) > 2 and word.value.endswith(":") and "/" not in word.value
    )
    found: set[int] = set()
    for start in starts:
        _chain(args, start, found)
    return found


def _chain(args: list[Word], i: int, found: set[int]) -> None:
    prompts = 0
    while i < len(args) and not args[i].op:
        value = args[i].value
        if prompts < 2 and (value in _PROMPTS or value.endswith((":", "$", "#"))):
            prompts += 1
            i += 1
            continue
        if "=" in value and not value.startswith(("-", "=")):
            i += 1  # VAR=value before a command
            continue
        found.add(i)
        if value.rsplit("/", 1)[-1] not in _WRAPPERS:
            return
        i += 1
        while i < len(args) and not args[i].op:
            word = args[i].value
            if word in _WRAPPER_VALUE_FLAGS:
                i += 2
            elif word.startswith("-") or "=" in word or word[:1].isdigit():
                i += 1
            else:
                break


def _apply(
    text: str,
    row: Row,
    rest: list[Word],
    at_start: bool,
    stage: list[Word],
    fed_by: list[Word] | None,
    line_end: int,
    add: Add,
) -> None:
    forms = row.forms.split()
    if row.sub and not _has_sub(rest, row.sub):
        return
    if row.when and not any(_has_flag(rest, flag) for flag in row.when.split()):
        return
    flags = row.flags.split()
    for form in forms:
        if form in ("next", "attached", "eq", "opts"):
            _options(row, form, flags, rest, add)
        elif not at_start:
            continue
        elif form == "stdin":
            _stdin(text, row, rest, stage, fed_by, line_end, add)
        elif form == "last":
            operands = _operands(rest, row)
            if operands:
                _secret(operands[-1], 0, row, add)
        elif form == "operand":
            operands = _operands(rest, row)
            if len(operands) >= row.nth:
                _secret(operands[row.nth - 1], 0, row, add)
        elif form == "pgpass":
            for word in rest:
                _pgpass_word(word, add)
        elif form == "keyword":
            for i, word in enumerate(rest[:-1]):
                if word.value.lower() in flags and not rest[i + 1].op:
                    _secret(rest[i + 1], 0, row, add)


def _options(row: Row, form: str, flags: list[str], rest: list[Word], add: Add) -> None:
    for i, word in enumerate(rest):
        if word.op:
            break
        value = word.value
        for flag in flags:
            if form in ("next", "opts") and value == flag:
                if i + 1 < len(rest) and not rest[i + 1].op and not _an_option(rest[i + 1], flags):
                    if form == "opts":
                        _option_list(rest[i + 1], row, add)
                    else:
                        _secret(rest[i + 1], 0, row, add)
            elif form == "eq" and value.startswith(flag + "="):
                _secret(word, len(flag) + 1, row, add)
            elif (
                form == "attached"
                and len(value) > len(flag)
                and value.startswith(flag)
                and not flag.startswith("--")
            ):
                _secret(word, len(flag), row, add)


def _an_option(word: Word, flags: list[str]) -> bool:
    """The word after a flag is another option, not its value (``ssh-keygen -N -f``)."""
    value = word.value
    return value in flags or _OPTION.pattern.fullmatch(value) is not None


def _option_list(word: Word, row: Row, add: Add) -> None:
    """``-o user=u,password=PW,vers=3``: the values of the row's keys."""
    keys = row.keys.split()
    offset = 0
    for item in word.value.split(","):
        key, sep, _ = item.partition("=")
        if sep and key.lower() in keys:
            start = offset + len(key) + 1
            _mark(word, start, offset + len(item), add)
        offset += len(item) + 1


def _has_sub(rest: list[Word], sub: str) -> bool:
    values = [w.value for w in rest if not w.op]
    return all(s in values for s in sub.split())


def _has_flag(rest: list[Word], flag: str) -> bool:
    for word in rest:
        if word.op:
            return False
        value = word.value
        if value == flag or value.startswith(flag + "="):
            return True
        if (
            len(flag) == 2
            and flag[0] == "-"
            and len(value) > 2
            and value[0] == "-"
            and value[1] != "-"
            and value[1:].isalpha()
            and flag[1] in value[1:]
        ):
            return True  # a cluster of short flags: -bc, -kS
    return False


def _operands(rest: list[Word], row: Row) -> list[Word]:
    """The operands after the row's sub-command words: not options, devices or shares."""
    words = [w for w in rest if not w.op or w.op == "<<<"]
    cut = [i for i, w in enumerate(words) if w.value in row.sub.split()] if row.sub else []
    if cut:
        words = words[max(cut) + 1 :]
    out: list[Word] = []
    for word in words:
        if word.op:
            break
        value = word.value
        if not value or value.startswith("-") or (value.startswith("/") and row.tools == "net"):
            continue
        if row.tools == "net" and (value == "*" or (len(value) == 2 and value[1] == ":")):
            continue  # net use Z: (or *): a device; the share and the password follow
        out.append(word)
    return out


def _stdin(
    text: str,
    row: Row,
    rest: list[Word],
    stage: list[Word],
    fed_by: list[Word] | None,
    line_end: int,
    add: Add,
) -> None:
    """The secret fed on standard input: a here-string, a here-document, or an echo/printf pipe."""
    for words in (stage, fed_by or []):
        for i, word in enumerate(words):
            if word.op == "<<<" and i + 1 < len(words) and not words[i + 1].op:
                _payload(words[i + 1], row, add)
            elif word.op in ("<<", "<<-") and i + 1 < len(words) and not words[i + 1].op:
                _heredoc(text, words[i + 1].value, word.op == "<<-", row, line_end, add)
    if fed_by:
        args = [w for w in _args(fed_by) if not w.op]
        # the echo/printf that feeds the pipe: in command position, or after prose ("Deploy
        # fails: echo PW | sudo -S …"): the last one in the stage
        first = next(
            (i for i in range(len(args) - 1, -1, -1) if _name(args[i]) in ("echo", "printf")),
            len(args),
        )
        feeder = _name(args[first]) if first < len(args) else ""
        if feeder in ("echo", "printf"):
            echo = feeder == "echo"
            for word in args[first + 1 :]:
                value = word.value
                if echo and value.startswith("-") and value[1:].isalpha():
                    continue  # echo -n, -e
                if not echo and value.replace("%s", "").replace("\\n", "").strip() == "":
                    continue  # printf '%s\n'
                _payload(word, row, add)


def _name(word: Word) -> str:
    """A command word's name: its basename, lower case, without ``.exe``."""
    return word.value.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower().removesuffix(".exe")


def _payload(word: Word, row: Row, add: Add) -> None:
    """A value fed on stdin: its first line (a password prompt reads one), or for a row with a
    ``split`` (``user:PW`` lines) each line's part after it, escaped ``\\n`` breaks included."""
    if not row.split:
        end = word.value.find("\n")
        _secret(word, 0, row, add, end if end >= 0 else None)
        return
    offset = 0
    for match in _SPLIT_LINES.pattern.finditer(word.value + "\n"):
        line_end = match.start()
        if line_end > offset:
            if row.split in word.value[offset:line_end]:
                _secret(word, offset, row, add, line_end)
            else:
                _mark(word, offset, line_end, add)  # not a user:PW line: all of it
        offset = match.end()


def _heredoc(
    text: str, delimiter: str, strip_tabs: bool, row: Row, line_end: int, add: Add
) -> None:
    """The lines of a here-document after its command line, up to its delimiter."""
    pos = line_end + 1
    limit = min(len(text), pos + MAX_LINE * 4)
    while pos < limit:
        end = text.find("\n", pos, limit)
        end = limit if end < 0 else end
        line = text[pos:end]
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            return
        if line.strip():
            value = line.lstrip(" \t")
            start = end - len(value)
            word = Word(value, list(range(start, end)), start, end, _NONE, "")
            _secret(word, 0, row, add)
            if not row.split:
                return
        pos = end + 1


def _secret(word: Word, start: int, row: Row, add: Add, stop: int | None = None) -> None:
    """Report ``word.value[start:stop]`` (after the row's separator) unless it is no secret."""
    if word.op:
        return
    end = len(word.value) if stop is None else stop
    value = word.value[start:end]
    if row.split:
        cut = value.find(row.split)
        if cut < 0:
            return  # curl -u user: a prompt for the password
        start += cut + 1
        value = value[cut + 1 :]
    if row.source:
        kind, sep, rest = value.partition(":")
        if sep and kind in ("env", "file", "fd"):
            return
        if sep and kind == "pass":
            start += 5
            value = rest
        elif value == "stdin":
            return
    if not value or value in ("*", "-") or start in word.expands:
        return  # empty, a prompt, or a reference ($PW, "${PW}", $(cat f))
    if MARKER_PATTERN.fullmatch(value):
        return
    _mark(word, start, start + len(value), add)


def _mark(word: Word, start: int, end: int, add: Add) -> None:
    if end > start:
        add(P_PASSWORD, "password", word.pos[start], word.pos[end - 1] + 1)


def _pgpass_word(word: Word, add: Add) -> None:
    """A .pgpass line in an echo/printf argument: its fifth field."""
    if word.op or ":" not in word.value:
        return
    offset = 0
    for match in _SPLIT_LINES.pattern.finditer(word.value + "\n"):
        head = _PGPASS_WORD.pattern.match(word.value, offset, match.start())
        if head is not None and head.end() < match.start() and head.end() not in word.expands:
            _mark(word, head.end(), match.start(), add)
        offset = match.end()
