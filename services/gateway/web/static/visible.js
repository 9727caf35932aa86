// Characters a reader cannot see, made visible. Agent output, tool arguments and reviewer notes
// may carry bidi controls (U+202E turns "exe.txt" into what reads as "txt.exe"), zero-width
// characters or NUL and other control codes: a reviewer would approve what they did not see.
// The page shows each as a token such as <U+202E>; what is stored and sent stays unchanged.

// Control codes (C0, DEL, C1; newline and tab are layout, not hidden), format characters (bidi
// embeddings, overrides and isolates, LRM / RLM, zero-width space / joiners, BOM, word joiner,
// tags) and the line and paragraph separators, which break a line where none shows.
const INVISIBLE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;
const LAYOUT = new Set(["\n", "\t"]);

function codePoint(char) {
  return `U+${char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

function isHidden(char) {
  return !LAYOUT.has(char);
}

/** `text` with every invisible character written as <U+XXXX>: for titles and labels. */
export function escapeInvisible(text) {
  return String(text).replace(INVISIBLE, (char) => (isHidden(char) ? `<${codePoint(char)}>` : char));
}

/** `text` as DOM nodes: text nodes, and each invisible character as a marked <U+XXXX> token
 * (styled apart, so it cannot pass for the same letters typed by the agent). */
export function visibleNodes(text) {
  const nodes = [];
  let last = 0;
  const source = String(text);
  for (const match of source.matchAll(INVISIBLE)) {
    const char = match[0];
    if (!isHidden(char)) continue;
    if (match.index > last) nodes.push(document.createTextNode(source.slice(last, match.index)));
    const token = document.createElement("span");
    token.className = "invisible-char";
    token.title = `An invisible character (${codePoint(char)}), shown here; the text itself is unchanged`;
    token.textContent = `<${codePoint(char)}>`;
    nodes.push(token);
    last = match.index + char.length;
  }
  if (last < source.length || nodes.length === 0) nodes.push(document.createTextNode(source.slice(last)));
  return nodes;
}

/** Put `text` in `node`, replacing what it held, with invisible characters shown. */
export function setText(node, text) {
  node.replaceChildren(...visibleNodes(text ?? ""));
}

/** JSON for a field the reviewer edits: invisible characters as JSON escapes (\u202e), which
 * show in the field and parse back to the very same string. */
export function editableJson(value) {
  // split("") gives UTF-16 units: a character past U+FFFF (a tag) is JSON's two escapes.
  const escape = (char) =>
    char
      .split("")
      .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`)
      .join("");
  return JSON.stringify(value, null, 2).replace(INVISIBLE, (char) => (isHidden(char) ? escape(char) : char));
}
