// Next's `next/font/google` fetches its fonts from Google when a UI is built; this machine cannot
// reach Google. Next reads mocked answers from the module NEXT_FONT_GOOGLE_MOCKED_RESPONSES names
// (its own test hook): every font the UIs ask for is served as a local DejaVu Sans instead. Only
// the typeface changes; the UIs' code is untouched.
const FONT = process.env.OFFLINE_FONT ?? "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const css = (family) =>
  `@font-face {\n  font-family: '${family}';\n  font-style: normal;\n  font-weight: 100 900;\n` +
  `  src: url(${FONT}) format('truetype');\n}\n`;

module.exports = new Proxy(
  {},
  {
    // Bundlers probe a module for other keys (__esModule, then...): only URLs are fonts.
    get: (_, url) =>
      typeof url === "string" && url.startsWith("https://")
        ? css(new URL(url).searchParams.get("family")?.split(":")[0] ?? "Inter")
        : undefined,
  },
);
