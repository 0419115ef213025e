#!/bin/sh
# Integration: `kgate search` shows live progress on stderr and writes OUTDIR/report.html: a
# well-formed (python3 html.parser, every element closed in order), self-contained page (no
# script, no external reference) with the speedup plot as inline SVG, the winner's source and
# verdict, every candidate's verdict and reason codes and the baseline, and with hostile candidate
# text (markup, a terminal escape, invalid UTF-8, a bidirectional override and other invisible
# characters, in the source and in a file name) escaped: \xNN and \uNNNN as in every report
# (kgate 0.2 replaced controls by U+FFFD and let the override through).
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_verifier

mkdir -p "$tmp/cands"
{ printf '/* </pre><script>alert(1)</script> & "q" \033[31mACCEPTED\033[0m \377\376 */\n'
  printf '/* a Trojan-source line: \342\200\256 } \342\201\246 if (admin) \342\201\251 \342\200\213\342\200\250 caf\303\251 */\n'
  cat "$CANDS/honest.c"; } >"$tmp/cands/a_hostile_comment.c"
cp "$CANDS/hostile_zero.c" "$tmp/cands/b_<img src=x onerror=alert(2)>$(printf '\342\200\256').c"
cp "$CANDS/broken.c" "$tmp/cands/c_broken.c"
# a name the replay agent cannot read (a directory): its log line, shown as "[agent] skipped ...",
# quotes the name with a terminal escape and an override in it
mkdir "$tmp/cands/0_unreadable$(printf '\033[31m\342\200\256').c"
out="$tmp/out"
"$KGATE" search softmax --agent replay --agent-opt dir="$tmp/cands" --rounds 1 --branch 4 --candidates 1 \
	--finalists 2 --retime 2 --out "$out" $P >"$tmp/s.out" 2>"$tmp/s.err"
rc=$?
ok "html: search exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/s.out" "$tmp/s.err" | sed 's/^/     | /'
ok "progress: on stderr, per verification" grep -Eq '^\[round 1/1\] verified [1-3]/3 \| .* \| about [0-9]+ s left$' "$tmp/s.err"
ok "progress: the best speedup with its interval" grep -Eq 'best [0-9.]+x \[[0-9.]+, [0-9.]+\]' "$tmp/s.err"
ok "html: written beside the history" [ -s "$out/report.html" ] && [ -s "$out/history.jsonl" ]
ok "html: well-formed, self-contained, hostile text escaped" python3 - "$out/report.html" <<'PY'
import sys, unicodedata
from html.parser import HTMLParser
VOID = {"meta", "br", "hr", "img", "input", "link", "circle", "line", "polyline", "path", "rect"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.tags, self.text = [], [], set(), []
    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for k, v in attrs:
            if k in ("src", "href") or k.startswith("on"):
                self.errors.append("attribute %s=%r" % (k, v))
        if tag not in VOID:
            self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1:] or "nothing"))
        else:
            self.stack.pop()
    def handle_data(self, d):
        self.text.append(d)
raw = open(sys.argv[1], "rb").read()
text = raw.decode("utf-8")  # must be valid UTF-8
p = Check()
p.feed(text)
p.close()
body = "".join(p.text)
problems = list(p.errors)
if p.stack: problems.append("unclosed: %s" % p.stack)
if "script" in p.tags or "img" in p.tags: problems.append("a script or img element: %s" % sorted(p.tags))
if "svg" not in p.tags or "circle" not in p.tags: problems.append("no inline SVG plot")
if "\x1b" in text: problems.append("a raw terminal escape")
if "http://" in text or "https://" in text: problems.append("an external reference")
for want in ("</pre><script>alert(1)</script>", "<img src=x onerror=alert(2)>", "sandbox.crash", "compile.error",
             "baseline", "trusted C reference", "kg_forward", "Re-timed 2 times"):
    if want not in body: problems.append("missing text: %r" % want)
for want in ("\\x1b[31mACCEPTED", "\\xff\\xfe", "\\u202e } \\u2066 if (admin) \\u2069 \\u200b\\u2028 caf\u00e9",
             "alert(2)>\\u202e"):
    if want not in body: problems.append("not escaped visibly: %r" % want)
invisible = sorted({"U+%04X" % ord(c) for c in text if unicodedata.category(c) in ("Cf", "Zl", "Zp")})
if invisible: problems.append("raw invisible characters: %s" % invisible)
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
PY
ok "terminal: the agent's log line is there, escaped" grep -q '\[agent\] skipped .*0_unreadable\\x1b\[31m\\u202e\.c' "$tmp/s.err"
ok "terminal: the search's lines hold no raw control or invisible character" python3 -c '
import sys, unicodedata
for f in sys.argv[1:]:
    t = open(f, "rb").read().decode("utf-8")
    bad = [c for c in t if (c < " " and c not in "\t\n") or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
           and c not in "\t\n"]
    assert not bad, (f, bad[:5])' "$tmp/s.out" "$tmp/s.err"
finish
