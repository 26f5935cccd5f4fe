// Agent text as Markdown, made safe: marked turns it into HTML, DOMPurify keeps only inert
// HTML (no script, no event handler, no URL the browser would load), and the result is appended
// as DOM nodes. The page's Content-Security-Policy would stop a script or a load that got
// through anyway; the sanitiser does not count on it.
import { Marked } from "./vendor/marked/marked.esm.js";
import DOMPurify from "./vendor/dompurify/purify.es.js";

const marked = new Marked({ gfm: true, breaks: false, async: false });

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  // HTML only: no inline SVG or MathML, whose drawing could cover the page's own controls.
  USE_PROFILES: { html: true },
  // Nothing the agent writes may look like, or act as, the page's own controls or styles;
  // and no media or plugin element, each of which loads what it names.
  FORBID_TAGS: [
    "style", "form", "button", "textarea", "select", "option", "dialog", "template",
    "video", "audio", "source", "picture", "track", "object", "embed",
  ],
  FORBID_ATTR: ["style", "class", "id", "autofocus", "tabindex"],
};

// Attributes whose value is a URL the browser may fetch or follow (HTML's, and the legacy ones
// browsers still honour, such as <table background>). DOMPurify keeps several of them, so the
// page would load what an agent names once the nodes join the document.
const URL_ATTRIBUTES = new Set([
  "action", "archive", "background", "cite", "classid", "codebase", "data", "dynsrc", "formaction",
  "href", "icon", "imagesrcset", "longdesc", "lowsrc", "manifest", "ping", "poster", "profile",
  "src", "srcset", "usemap", "xlink:href", "xmlns",
]);
// The only ones kept: a link's target (checked below), and an image's source, which
// renderMarkdown turns into a link before the image can load (nodes are inert until appended).
const KEPT_URL_ATTRIBUTES = new Set(["a href", "img src"]);

DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
  const kept = KEPT_URL_ATTRIBUTES.has(`${node.nodeName.toLowerCase()} ${data.attrName}`);
  if (URL_ATTRIBUTES.has(data.attrName) && !kept) data.keepAttr = false;
});

// A link the page will follow: an absolute http(s) URL only, or mailto in Markdown; null for
// anything else. Relative URLs (protocol-relative "//host" too) are not links: they would
// resolve against the playground, which the agent knows nothing of.
export function safeHref(url, { mailto = false } = {}) {
  if (typeof url !== "string" || !url.trim()) return null;
  try {
    const parsed = new URL(url); // no base: a relative URL throws
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
    if (mailto && parsed.protocol === "mailto:") return parsed.href;
  } catch {
    // not an absolute URL
  }
  return null;
}

export function renderMarkdown(target, text) {
  const fragment = DOMPurify.sanitize(marked.parse(text), PURIFY);
  for (const link of fragment.querySelectorAll("a")) {
    const href = safeHref(link.getAttribute("href"), { mailto: true });
    if (href === null) {
      link.removeAttribute("href");
    } else {
      link.setAttribute("href", href);
      link.setAttribute("target", "_blank");
      link.setAttribute("rel", "noopener noreferrer nofollow");
    }
  }
  // The page loads nothing the agent names: an image is a link to it (data: URLs, which
  // fetch nothing, stay images).
  for (const image of fragment.querySelectorAll("img")) {
    const src = (image.getAttribute("src") || "").trim();
    if (src.startsWith("data:image/")) continue;
    const href = safeHref(src);
    const label = "image: " + (image.getAttribute("alt") || src || "(no source)");
    const replacement = document.createElement(href ? "a" : "span");
    replacement.textContent = label;
    if (href) {
      replacement.setAttribute("href", href);
      replacement.setAttribute("target", "_blank");
      replacement.setAttribute("rel", "noopener noreferrer nofollow");
    }
    image.replaceWith(replacement);
  }
  // GFM task lists are the only inputs kept, and they only show.
  for (const input of fragment.querySelectorAll("input")) {
    if (input.getAttribute("type") === "checkbox") input.setAttribute("disabled", "");
    else input.remove();
  }
  target.replaceChildren(fragment);
}
