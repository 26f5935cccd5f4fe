// Agent text as Markdown, made safe: marked turns it into HTML, DOMPurify keeps only inert
// HTML (no script, no event handler, no javascript: URL), and the result is appended as DOM
// nodes. The page's Content-Security-Policy would stop a script that got through anyway.
import { Marked } from "./vendor/marked/marked.esm.js";
import DOMPurify from "./vendor/dompurify/purify.es.js";

const marked = new Marked({ gfm: true, breaks: false, async: false });

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  // HTML only: no inline SVG or MathML, whose drawing could cover the page's own controls.
  USE_PROFILES: { html: true },
  // Nothing the agent writes may look like, or act as, the page's own controls or styles.
  FORBID_TAGS: ["style", "form", "button", "textarea", "select", "option", "dialog", "template"],
  FORBID_ATTR: ["style", "class", "id", "autofocus", "tabindex"],
};

// A link the page will follow: http(s) only, or mailto in Markdown; null for anything else.
export function safeHref(url, { mailto = false } = {}) {
  if (typeof url !== "string") return null;
  try {
    const parsed = new URL(url, document.baseURI);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
    if (mailto && parsed.protocol === "mailto:") return parsed.href;
  } catch {
    // not a URL at all
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
    const src = image.getAttribute("src") || "";
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
