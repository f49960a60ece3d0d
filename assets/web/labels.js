// Setting keys, option codes and server messages in words: "LLM model", not "Llm Model";
// "English", not "en"; "Knowledge base", not "knowledge_base".

/** Words the page writes in capitals wherever they appear in a key. */
const ACRONYMS = new Set(['llm', 'jwt', 'api', 'url', 'urls', 'ocr', 'cpu', 'gpu', 'id', 'ttl', 'mcp', 'sse',
  'json', 'http', 'https', 'pdf', 'cors', 'gguf', 'ui', 'ip', 'zip', 'csv']);

/** Keys whose words alone would read oddly. */
const KEYS = {
  require_confirmation_for_high_risk: 'Confirm high-risk actions',
  enabled_modules: 'Enabled modules',
  knowledge_sources: 'Web pages to add',
  onboarding_completed: 'Setup completed',
  primary_language: 'Primary language',
  assistant_tone: 'Assistant tone',
  system_prompt: 'Extra instructions',
  top_k: 'Passages per answer',
  max_upload_bytes: 'Largest upload',
  api_keys: 'API keys',
};

const languages = typeof Intl.DisplayNames === 'function'
  ? new Intl.DisplayNames(['en'], { type: 'language' }) : null;

/** A key or code as words, first letter capitalised: `llm_model` -> "LLM model". */
export function label(key) {
  if (KEYS[key]) return KEYS[key];
  const words = String(key).split(/[_\s]+/).filter(Boolean)
    .map((w) => (ACRONYMS.has(w.toLowerCase()) ? w.toUpperCase() : w.toLowerCase()));
  if (!words.length) return String(key);
  const [first, ...rest] = words;
  return [first[0].toUpperCase() + first.slice(1), ...rest].join(' ');
}

/** A language code's name ("en" -> "English"), or the code when unknown. */
export function language(code) {
  try {
    const name = languages?.of(code);
    return name && name !== code ? name : code;
  } catch {
    return code;
  }
}

/** An option of a question or a setting's value as words. */
export function optionLabel(key, option) {
  if (/language/.test(key) && /^[a-z]{2,3}(-[A-Za-z]{2,4})?$/.test(option)) return language(option);
  return label(option);
}

/** A server message as a sentence, without a leading `key:` or a quoted key. */
export function humanMessage(message, key) {
  let t = String(message || '').trim();
  if (key) {
    if (t.startsWith(`${key}:`)) t = t.slice(key.length + 1).trim();
    t = t.replaceAll(`'${key}'`, 'this question');
  }
  if (!t) return '';
  return `${t[0].toUpperCase()}${t.slice(1)}${/[.!?]$/.test(t) ? '' : '.'}`;
}

/** Settings whose values are option codes. */
const CODED = new Set(['industry', 'enabled_modules', 'modules', 'primary_language', 'assistant_tone']);

/** A setting's value as words: Yes / No, option codes by name, lists joined. */
export function valueInWords(key, v) {
  if (v === null || v === undefined || v === '') return '—';
  if (typeof v === 'boolean') return v ? 'Yes' : 'No';
  const word = (x) => (CODED.has(key) ? optionLabel(key, String(x)) : String(x));
  if (Array.isArray(v)) return v.length ? v.map(word).join(', ') : '—';
  if (typeof v === 'string') return word(v);
  return null;
}
