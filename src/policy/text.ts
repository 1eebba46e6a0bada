// Caller-chosen text as messages show it: a key, an argument name or a field path may be a
// megabyte long, and a refusal or a 422 must not repeat it whole.

/** Code units of one shown name or path segment, and segments of one shown path. */
export const shown_units_max = 64;
export const shown_segments_max = 16;

const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * At most `units_max` UTF-16 code units of `text`, never ending inside a surrogate pair: half a
 * character has no canonical JSON form, so evidence holding it could not be written.
 */
export function cutText(text: string, units_max: number): string {
  if (text.length <= units_max) return text;
  return text.slice(0, isHighSurrogate(text.charCodeAt(units_max - 1)) ? units_max - 1 : units_max);
}

/** `text` cut as cutText cuts it, with "…" appended; `text` itself when it fits. */
export function shortened(text: string, units_max = shown_units_max): string {
  return text.length <= units_max ? text : `${cutText(text, units_max)}…`;
}

/** Characters (code points) in `text`: a surrogate pair counts once. */
export function characterCount(text: string): number {
  let characters = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    if (isHighSurrogate(text.charCodeAt(i)) && isLowSurrogate(text.charCodeAt(i + 1))) {
      characters--;
      i++;
    }
  }
  return characters;
}

/** The most of a shown path. */
export const shown_path_units_max = 256;

/**
 * A field path (`args.items.2.sku`): each segment shortened, at most shown_segments_max of
 * them, and the whole at most shown_path_units_max code units (then shortened at its end).
 */
export function shownPath(segments: readonly string[]): string {
  const shown = segments.slice(0, shown_segments_max).map((segment) => shortened(segment));
  if (segments.length > shown_segments_max) shown.push("…");
  return shortened(shown.join("."), shown_path_units_max);
}

/** What the evidence puts in place of a number JSON cannot carry (a literal such as 1e400 parses
 *  to Infinity): the policy sees it in its place, and names it as the number it stands for. */
export const not_a_finite_number = "[not a finite number]";

export const lone_surrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `text` has a UTF-16 surrogate without its pair: it has no UTF-8 form. */
export function hasLoneSurrogate(text: string): boolean {
  return lone_surrogate.test(text);
}
