// The page is one more client of the job API: it signs in for a session
// cookie and then calls /v1 as any program would, sending the session's
// CSRF token with every change.
'use strict';

const strings = {
  en: {
    skip: 'Skip to content', pageLanguage: 'Page language', signOut: 'Sign out', signedInAs: 'Signed in as {name}',
    signInTitle: 'Sign in', token: 'Access token', tokenHint: "Your account's token, as the server's owner gave it to you.",
    signIn: 'Sign in', uploadTitle: 'Transcribe recordings', spokenLanguage: 'Spoken language',
    anyLanguage: "The engine's default", engine: 'Engine', serverEngine: "The server's choice",
    dropHere: 'Drop recordings here', orChoose: 'or choose files', limit: 'Up to {size} per file.',
    myJobs: 'My jobs', colRecording: 'Recording', colState: 'State', colProgress: 'Progress', colDuration: 'Duration',
    colEngine: 'Engine', colStarted: 'Sent', noJobs: 'No jobs yet: drop a recording above.', newer: 'Newer', older: 'Older',
    back: 'All jobs', jobId: 'Job id', revive: 'Try again', cancel: 'Cancel job', transcript: 'Transcript',
    copy: 'Copy text', copied: 'The text is copied.', copyFailed: 'The text could not be copied; select it and copy it yourself.',
    download: 'Download', segmentsHint: 'Choose a line to play the recording from there.',
    uploading: 'Sending… {pct}%', waiting: 'Waiting to be sent', sent: 'Sent.', openJob: 'Open the job',
    sameJob: 'This recording was sent before; here is its job.', uploadFailed: 'Not sent: {why}',
    networkError: 'The server cannot be reached; check the connection and try again.',
    chunks: '{done} of {total} parts', openWebUI: 'in the Temporal Web UI', noTranscriptYet: 'The transcript appears here once the job is done.',
    reviving: 'The job runs again.', cancelling: 'The job is being cancelled; the recording is kept.',
    wrongToken: 'This token opens no account. Check it and try again.', tooMany: 'Too many attempts. Wait {s} seconds and try again.',
    signedOut: 'You are signed out.', sessionEnded: 'Your session has ended; sign in again.', emptyText: '(no speech was recognised)',
    jobGone: 'There is no such job, or it is not yours.',
    state_accepted: 'Waiting', state_fetching: 'Fetching', state_converting: 'Converting', state_transcribing: 'Recognising',
    state_replying: 'Finishing', state_done: 'Done', state_failed: 'Failed', state_dead: 'Gave up', state_cancelled: 'Cancelled',
    retrying: 'Trying again at {at}: {why}',
    kind_empty_audio: 'The recording is empty.', kind_unsupported_format: 'This file is not a recording that can be read.',
    kind_too_long: 'The recording is longer than this server accepts.', kind_no_speech: 'No speech was found in the recording.',
    kind_engine_rejected: 'The speech engine refused the recording.', kind_engine_unauthorized: "The speech engine refused this server's key; the server's owner must fix it.",
    kind_operation_failed: 'The speech engine failed on the recording.', kind_engine_not_configured: 'The chosen engine is not set up on this server.',
    kind_unsupported_language: 'The engine does not know this language; choose another engine or language.',
    kind_service_error: 'The speech engine had trouble; the job gave up after several tries.', kind_no_ack: 'The speech engine could not be reached.',
    kind_timeout: 'The speech engine took too long.', kind_internal: 'Something went wrong on the server.',
    kind_file_too_big: 'The file is too big.', kind_source_file_missing: 'The file is no longer there.', kind_service_refused: 'The service refused the file.',
    kind_intake_not_running: 'The service this job came from is not connected.',
    err_too_large: 'the file is larger than this server accepts.', err_empty_audio: 'the file is empty.',
    err_unsupported_format: 'this file is not a recording that can be read.', err_invalid_language: 'the language is not a language code.',
    err_invalid_engine: 'this engine is not offered here.', err_unauthorized: 'your session has ended; sign in again.',
    err_csrf: 'the page is out of date; reload it.', err_storage_error: 'the server could not store the file.',
    err_unavailable: 'the job service cannot be reached right now; try again soon.', err_not_found: 'there is no such job, or it is not yours.',
    err_not_revivable: 'this job cannot run again now.', err_closed: 'the job has already ended.',
  },
  ru: {
    skip: 'К содержимому', pageLanguage: 'Язык страницы', signOut: 'Выйти', signedInAs: 'Вы вошли как {name}',
    signInTitle: 'Вход', token: 'Ключ доступа', tokenHint: 'Ключ вашей учётной записи, который дал владелец сервера.',
    signIn: 'Войти', uploadTitle: 'Расшифровать записи', spokenLanguage: 'Язык речи',
    anyLanguage: 'По умолчанию для движка', engine: 'Движок', serverEngine: 'На выбор сервера',
    dropHere: 'Перетащите записи сюда', orChoose: 'или выберите файлы', limit: 'До {size} на файл.',
    myJobs: 'Мои задания', colRecording: 'Запись', colState: 'Состояние', colProgress: 'Ход', colDuration: 'Длительность',
    colEngine: 'Движок', colStarted: 'Отправлено', noJobs: 'Заданий пока нет: перетащите запись выше.', newer: 'Новее', older: 'Старше',
    back: 'Все задания', jobId: 'Номер задания', revive: 'Повторить', cancel: 'Отменить задание', transcript: 'Расшифровка',
    copy: 'Копировать текст', copied: 'Текст скопирован.', copyFailed: 'Не удалось скопировать; выделите текст и скопируйте сами.',
    download: 'Скачать', segmentsHint: 'Выберите строку, чтобы слушать запись с этого места.',
    uploading: 'Отправка… {pct}%', waiting: 'Ждёт отправки', sent: 'Отправлено.', openJob: 'Открыть задание',
    sameJob: 'Эта запись уже отправлялась; вот её задание.', uploadFailed: 'Не отправлено: {why}',
    networkError: 'Сервер недоступен; проверьте связь и попробуйте снова.',
    chunks: '{done} из {total} частей', openWebUI: 'в Temporal Web UI', noTranscriptYet: 'Расшифровка появится здесь, когда задание завершится.',
    reviving: 'Задание запущено снова.', cancelling: 'Задание отменяется; запись сохранится.',
    wrongToken: 'Этот ключ не подходит ни к одной учётной записи. Проверьте его.', tooMany: 'Слишком много попыток. Подождите {s} с и попробуйте снова.',
    signedOut: 'Вы вышли.', sessionEnded: 'Сеанс закончился; войдите снова.', emptyText: '(речь не распознана)',
    jobGone: 'Такого задания нет, или оно не ваше.',
    state_accepted: 'Ждёт', state_fetching: 'Загрузка', state_converting: 'Преобразование', state_transcribing: 'Распознавание',
    state_replying: 'Завершение', state_done: 'Готово', state_failed: 'Ошибка', state_dead: 'Не удалось', state_cancelled: 'Отменено',
    retrying: 'Новая попытка в {at}: {why}',
    kind_empty_audio: 'Запись пустая.', kind_unsupported_format: 'Этот файл не удаётся прочитать как запись.',
    kind_too_long: 'Запись длиннее, чем принимает сервер.', kind_no_speech: 'В записи не найдено речи.',
    kind_engine_rejected: 'Движок распознавания отклонил запись.', kind_engine_unauthorized: 'Движок отклонил ключ сервера; это должен исправить владелец сервера.',
    kind_operation_failed: 'Движок распознавания не справился с записью.', kind_engine_not_configured: 'Выбранный движок не настроен на этом сервере.',
    kind_unsupported_language: 'Движок не знает этот язык; выберите другой движок или язык.',
    kind_service_error: 'У движка распознавания сбой; после нескольких попыток задание остановлено.', kind_no_ack: 'Движок распознавания недоступен.',
    kind_timeout: 'Движок распознавания не успел.', kind_internal: 'На сервере что-то пошло не так.',
    kind_file_too_big: 'Файл слишком большой.', kind_source_file_missing: 'Файла больше нет.', kind_service_refused: 'Сервис отказался отдать файл.',
    kind_intake_not_running: 'Сервис, из которого пришло задание, не подключён.',
    err_too_large: 'файл больше, чем принимает сервер.', err_empty_audio: 'файл пустой.',
    err_unsupported_format: 'этот файл не удаётся прочитать как запись.', err_invalid_language: 'язык указан неверно.',
    err_invalid_engine: 'этого движка здесь нет.', err_unauthorized: 'сеанс закончился; войдите снова.',
    err_csrf: 'страница устарела; обновите её.', err_storage_error: 'сервер не смог сохранить файл.',
    err_unavailable: 'служба заданий сейчас недоступна; попробуйте чуть позже.', err_not_found: 'такого задания нет, или оно не ваше.',
    err_not_revivable: 'это задание сейчас нельзя повторить.', err_closed: 'задание уже закончилось.',
  },
};

const PAGE_SIZE = 20;
const POLL_MS = 2000;
const LANG_KEY = 'transcriber.lang';

const $ = (id) => document.getElementById(id);
const state = {
  lang: 'en',
  session: null,
  pageTokens: [''], // the token of each page seen, so "Newer" can go back
  page: 0,
  nextToken: '',
  jobs: [], // summaries of the page shown
  details: new Map(), // id -> the job as GET /v1/jobs/{id} answers
  uploading: 0,
  jobId: '',
  segments: [],
  timer: 0,
};

function pickLanguage() {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved && strings[saved]) return saved;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en'];
  for (const l of langs) {
    const base = String(l).toLowerCase().split('-')[0];
    if (strings[base]) return base;
  }
  return 'en';
}

function t(key, vars) {
  let s = strings[state.lang][key] ?? strings.en[key] ?? key;
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.replaceAll('{' + k + '}', String(v));
  return s;
}

function has(key) { return key in strings.en; }

function applyLanguage(lang) {
  state.lang = lang;
  document.documentElement.lang = lang;
  $('ui-lang').value = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  if (state.session && state.session.signed_in) showSession();
  render();
}

function announce(msg) {
  // Cleared first so that the same message twice is still read out.
  const el = $('announce');
  el.textContent = '';
  setTimeout(() => { el.textContent = msg; }, 50);
}

// --- talking to the server ---

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function call(method, path, body) {
  const headers = {};
  if (method !== 'GET' && state.session && state.session.csrf_token) headers['X-CSRF-Token'] = state.session.csrf_token;
  let payload;
  if (body !== undefined) { headers['Content-Type'] = 'application/json'; payload = JSON.stringify(body); }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new APIError(0, 'network', t('networkError'));
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = data.error || {};
    const apiErr = new APIError(res.status, err.code || String(res.status), err.message || res.statusText);
    apiErr.retryAfter = Number(res.headers.get('Retry-After')) || 0;
    if (res.status === 401 && path.startsWith('/v1/')) sessionEnded();
    throw apiErr;
  }
  return data;
}

// plain is an API error in the page's words where it has them, else in the
// server's.
function plain(err) {
  if (err.code === 'network') return err.message;
  return has('err_' + err.code) ? t('err_' + err.code) : err.message;
}

function jobURL(id, suffix) { return '/v1/jobs/' + encodeURIComponent(id) + (suffix || ''); }

// --- signing in and out ---

async function loadSession() {
  try {
    state.session = await call('GET', '/session');
  } catch (e) {
    state.session = { signed_in: false, engines: [] };
  }
  if (!state.session.signed_in) { showSignIn(); return; }
  showSession();
  route();
}

function showSignIn(message) {
  stopPolling();
  $('home-view').hidden = true;
  $('job-view').hidden = true;
  $('signin').hidden = false;
  $('who').hidden = true;
  $('signout').hidden = true;
  $('signin-error').textContent = message || '';
  $('token').focus();
}

function sessionEnded() {
  if (!state.session || !state.session.signed_in) return;
  state.session = { signed_in: false, engines: [] };
  showSignIn(t('sessionEnded'));
}

function showSession() {
  const s = state.session;
  $('signin').hidden = true;
  $('who').hidden = false;
  $('who').textContent = t('signedInAs', { name: s.account });
  $('signout').hidden = false;
  const engine = $('engine');
  const chosen = engine.value;
  while (engine.options.length > 1) engine.remove(1);
  for (const name of s.engines || []) engine.add(new Option(name, name));
  engine.value = chosen;
  $('limit-hint').textContent = s.max_upload_bytes ? t('limit', { size: bytes(s.max_upload_bytes) }) : '';
}

async function signIn(ev) {
  ev.preventDefault();
  await signInWith($('token').value.trim());
}

// signInWith signs in with token and reports whether it did.
async function signInWith(token) {
  if (!token) return false;
  $('signin-error').textContent = '';
  try {
    state.session = await call('POST', '/session', { token });
  } catch (e) {
    if (e.status === 401) $('signin-error').textContent = t('wrongToken');
    else if (e.status === 429) $('signin-error').textContent = t('tooMany', { s: e.retryAfter || 5 });
    else $('signin-error').textContent = plain(e);
    $('token').select();
    return false;
  }
  $('token').value = '';
  state.details.clear();
  state.pageTokens = [''];
  state.page = 0;
  showSession();
  route();
  announce(t('signedInAs', { name: state.session.account }));
  return true;
}

async function signOut() {
  try { await call('POST', '/session/end'); } catch (e) { /* the cookie is cleared or already gone */ }
  state.session = { signed_in: false, engines: [] };
  state.details.clear();
  state.jobs = [];
  state.jobId = '';
  state.segments = [];
  state.text = '';
  $('job-rows').replaceChildren();
  $('uploads').replaceChildren();
  $('segments').replaceChildren();
  stopPlayer();
  history.replaceState(null, '', location.pathname);
  showSignIn(t('signedOut'));
}

// --- views ---

function route() {
  if (!state.session || !state.session.signed_in) return;
  const m = /^#job\/(.+)$/.exec(location.hash);
  if (m) {
    state.jobId = decodeURIComponent(m[1]);
    $('home-view').hidden = true;
    $('job-view').hidden = false;
    openJob(state.jobId);
  } else {
    state.jobId = '';
    $('job-view').hidden = true;
    $('home-view').hidden = false;
    $('player').pause();
    loadJobs();
  }
}

function render() {
  if (!state.session || !state.session.signed_in) return;
  if (state.jobId) renderJob(); else renderJobs();
}

// --- uploads ---

function uploadFiles(files) {
  const list = [...files];
  if (!list.length) return;
  const items = list.map((f) => {
    const li = document.createElement('li');
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = f.name + ' (' + bytes(f.size) + ')';
    const bar = document.createElement('progress');
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute('aria-label', f.name);
    const note = document.createElement('span');
    note.className = 'note';
    note.textContent = t('waiting');
    li.append(name, bar, note);
    $('uploads').prepend(li);
    return { file: f, bar, note };
  });
  const language = $('language').value;
  const engine = $('engine').value;
  (async () => {
    let last = null;
    for (const it of items) {
      const id = await uploadOne(it, language, engine);
      if (id) last = id;
    }
    loadJobs();
    // One recording sent: the person wants to see it through.
    if (items.length === 1 && last) location.hash = '#job/' + encodeURIComponent(last);
  })();
}

function uploadOne(it, language, engine) {
  return new Promise((resolve) => {
    // The server would refuse it too, but only after the browser sent it
    // all, or by closing the connection, which reads as a network error.
    if (state.session.max_upload_bytes && it.file.size > state.session.max_upload_bytes) {
      it.bar.remove();
      it.note.classList.add('error');
      it.note.textContent = t('uploadFailed', { why: t('err_too_large') });
      announce(it.file.name + ': ' + it.note.textContent);
      resolve('');
      return;
    }
    const form = new FormData();
    if (language) form.append('language', language);
    if (engine) form.append('engine', engine);
    form.append('file', it.file, it.file.name);
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/v1/jobs');
    xhr.setRequestHeader('X-CSRF-Token', state.session.csrf_token);
    xhr.responseType = 'json';
    xhr.upload.onprogress = (e) => {
      if (!e.lengthComputable) return;
      const pct = Math.round((e.loaded / e.total) * 100);
      it.bar.value = pct;
      it.note.textContent = t('uploading', { pct });
    };
    state.uploading++;
    const done = (id, msg, isError) => {
      state.uploading--;
      it.note.textContent = msg;
      it.note.classList.toggle('error', !!isError);
      // Nothing was kept: a full bar would say otherwise.
      if (isError) it.bar.remove();
      if (id) {
        it.bar.value = 100;
        const a = document.createElement('a');
        a.href = '#job/' + encodeURIComponent(id);
        a.textContent = t('openJob');
        it.note.append(' ', a);
      }
      announce(it.file.name + ': ' + msg);
      resolve(id);
    };
    xhr.onload = () => {
      const body = xhr.response || {};
      if (xhr.status === 202) {
        done(body.id, body.existing ? t('sameJob') : t('sent'));
        return;
      }
      const err = body.error || {};
      if (xhr.status === 401) sessionEnded();
      done('', t('uploadFailed', { why: plain(new APIError(xhr.status, err.code || '', err.message || xhr.statusText)) }), true);
    };
    xhr.onerror = () => done('', t('uploadFailed', { why: t('networkError') }), true);
    xhr.send(form);
  });
}

// --- my jobs ---

async function loadJobs() {
  const token = state.pageTokens[state.page] || '';
  let body;
  try {
    body = await call('GET', '/v1/jobs?limit=' + PAGE_SIZE + (token ? '&page_token=' + encodeURIComponent(token) : ''));
  } catch (e) {
    if (e.status !== 401) $('jobs-error').textContent = plain(e);
    return;
  }
  $('jobs-error').textContent = '';
  state.jobs = body.jobs || [];
  state.nextToken = body.next_page_token || '';
  renderJobs();
  await Promise.all(state.jobs.filter((j) => needsDetail(j.id)).map((j) => loadDetail(j.id)));
  renderJobs();
  schedule();
}

function needsDetail(id) {
  const d = state.details.get(id);
  return !d || !settled(d.state);
}

async function loadDetail(id) {
  try {
    state.details.set(id, await call('GET', jobURL(id)));
  } catch (e) { /* the list shows what it has; the next poll tries again */ }
}

function settled(s) { return s === 'done' || s === 'failed' || s === 'dead' || s === 'cancelled'; }

function renderJobs() {
  const rows = state.jobs.map((j) => {
    const d = state.details.get(j.id) || {};
    const s = d.state || j.state;
    const tr = document.createElement('tr');
    const name = document.createElement('a');
    name.href = '#job/' + encodeURIComponent(j.id);
    name.textContent = (d.original && d.original.name) || j.id;
    const first = cell(t('colRecording'), name);
    if (d.failure) {
      const f = document.createElement('span');
      f.className = 'failure';
      f.textContent = failureText(d);
      first.append(f);
    }
    const st = document.createElement('span');
    st.className = 'state state-' + s;
    st.textContent = t('state_' + s);
    tr.append(first, cell(t('colState'), st), cell(t('colProgress'), progressText(d, s)),
      cell(t('colDuration'), d.duration_seconds ? clock(d.duration_seconds) : ''),
      cell(t('colEngine'), d.engine || j.engine || ''), cell(t('colStarted'), when(j.started_at)));
    return tr;
  });
  $('job-rows').replaceChildren(...rows);
  $('jobs-empty').hidden = state.jobs.length > 0 || state.page > 0;
  $('newer').disabled = state.page === 0;
  $('older').disabled = !state.nextToken;
  $('pager').hidden = state.page === 0 && !state.nextToken;
}

function cell(label, content) {
  const td = document.createElement('td');
  td.dataset.label = label;
  if (content instanceof Node) td.append(content); else td.textContent = content;
  return td;
}

function progressText(d, s) {
  if (s === 'done') return '100%';
  if (settled(s) || d.progress === undefined) return '';
  const pct = Math.round(d.progress * 100) + '%';
  return d.chunks ? pct + ' · ' + t('chunks', { done: d.chunks_done || 0, total: d.chunks }) : pct;
}

function failureText(d) {
  const f = d.failure;
  if (!f) return '';
  return has('kind_' + f.kind) ? t('kind_' + f.kind) : f.message;
}

// --- one job ---

async function openJob(id) {
  state.segments = [];
  state.notice = '';
  $('segments').replaceChildren();
  $('transcript').hidden = true;
  $('job-message').textContent = '';
  $('job-failure').textContent = '';
  const player = $('player');
  player.src = jobURL(id, '/audio');
  for (const f of ['txt', 'srt', 'vtt', 'json']) {
    const a = $('dl-' + f);
    a.href = jobURL(id, '/transcript?format=' + f);
    a.download = id + '.' + f;
  }
  renderJob();
  $('job-title').focus({ preventScroll: true });
  await refreshJob();
}

async function refreshJob() {
  const id = state.jobId;
  if (!id) return;
  const before = state.details.get(id);
  try {
    state.details.set(id, await call('GET', jobURL(id)));
  } catch (e) {
    if (e.status === 404) {
      $('job-failure').textContent = t('jobGone');
      $('job-message').textContent = '';
      stopPlayer();
    }
    else if (e.status !== 401) $('job-message').textContent = plain(e);
    schedule();
    return;
  }
  if (id !== state.jobId) return;
  const d = state.details.get(id);
  if (!before || before.state !== d.state) $('job-status').textContent = t('colState') + ': ' + t('state_' + d.state);
  renderJob();
  if (d.state === 'done' && !state.segments.length) await loadTranscript(id);
  schedule();
}

function renderJob() {
  const d = state.details.get(state.jobId);
  $('job-title').tabIndex = -1;
  if (!d) {
    // Nothing of the job shown before may stay: it may be another
    // account's.
    $('job-title').textContent = state.jobId;
    for (const f of ['job-state', 'job-progress', 'job-duration', 'job-engine']) $(f).textContent = '';
    $('job-id').textContent = state.jobId;
    $('revive').hidden = true;
    $('cancel').hidden = true;
    $('job-facts').hidden = true;
    $('player').hidden = true;
    return;
  }
  $('job-facts').hidden = false;
  $('player').hidden = false;
  const name = (d.original && d.original.name) || d.id;
  $('job-title').textContent = name;
  for (const f of ['txt', 'srt', 'vtt', 'json']) $('dl-' + f).download = baseName(name) + '.' + f;
  const st = $('job-state');
  st.textContent = t('state_' + d.state);
  st.className = 'state state-' + d.state;
  $('job-progress').textContent = progressText(d, d.state);
  $('job-duration').textContent = d.duration_seconds ? clock(d.duration_seconds) : '';
  $('job-engine').textContent = d.engine || '';
  const idEl = $('job-id');
  idEl.replaceChildren(document.createTextNode(d.id));
  if (state.session.web_ui) {
    const a = document.createElement('a');
    a.href = state.session.web_ui + encodeURIComponent(d.id);
    a.target = '_blank';
    a.rel = 'noopener';
    a.textContent = t('openWebUI');
    idEl.append(' ', a);
  }
  let failure = failureText(d);
  if (d.failure && d.failure.message && failure !== d.failure.message) failure += ' (' + d.failure.message + ')';
  $('job-failure').textContent = failure;
  // What the person just did comes first, then why the job waits; a
  // finished job needs neither.
  if (d.state === 'done') state.notice = '';
  let message = state.notice || '';
  if (!message && d.last_error && !settled(d.state)) {
    message = t('retrying', { at: d.next_attempt_at ? when(d.next_attempt_at) : '…', why: d.last_error });
  }
  if (!message && !failure && d.state !== 'done') message = t('noTranscriptYet');
  $('job-message').textContent = message;
  $('revive').hidden = !(d.state === 'failed' || d.state === 'dead');
  $('cancel').hidden = d.state === 'done' || d.state === 'cancelled';
  if (d.state !== 'done') $('transcript').hidden = true;
}

async function loadTranscript(id) {
  let doc;
  try {
    doc = await call('GET', jobURL(id, '/transcript?format=json'));
  } catch (e) {
    state.notice = plain(e);
    renderJob();
    return;
  }
  if (id !== state.jobId) return;
  state.segments = (doc.segments && doc.segments.length) ? doc.segments : [{ start: 0, end: 0, text: doc.text || '' }];
  state.text = doc.text || state.segments.map((s) => s.text).join(' ');
  const items = state.segments.map((s, i) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.dataset.index = String(i);
    const time = document.createElement('span');
    time.className = 'time';
    time.textContent = clock(s.start);
    const text = document.createElement('span');
    if (s.speaker) {
      const sp = document.createElement('span');
      sp.className = 'speaker';
      sp.textContent = s.speaker + ':';
      text.append(sp);
    }
    text.append(s.text || t('emptyText'));
    b.append(time, text);
    li.append(b);
    return li;
  });
  $('segments').replaceChildren(...items);
  $('transcript').hidden = false;
}

function stopPlayer() {
  const player = $('player');
  player.pause();
  player.removeAttribute('src');
  player.load();
}

function playFrom(ev) {
  const b = ev.target.closest('button[data-index]');
  if (!b) return;
  const s = state.segments[Number(b.dataset.index)];
  const player = $('player');
  player.currentTime = s.start;
  player.play().catch(() => { /* the browser may refuse until the person presses play */ });
  highlight();
}

function highlight() {
  const now = $('player').currentTime;
  let current = -1;
  state.segments.forEach((s, i) => { if (now >= s.start && (now < s.end || i === state.segments.length - 1 && now <= s.end + 0.5)) current = i; });
  for (const b of $('segments').querySelectorAll('button[data-index]')) {
    const on = Number(b.dataset.index) === current;
    if (on && b.getAttribute('aria-current') !== 'true') b.scrollIntoView({ block: 'nearest' });
    if (on) b.setAttribute('aria-current', 'true'); else b.removeAttribute('aria-current');
  }
}

async function copyText() {
  const text = state.text || '';
  try {
    await navigator.clipboard.writeText(text);
    announce(t('copied'));
  } catch (e) {
    // Without a secure origin the clipboard API is missing; the old way
    // still works from a click.
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'sr-only';
    document.body.append(area);
    area.select();
    const ok = document.execCommand && document.execCommand('copy');
    area.remove();
    announce(ok ? t('copied') : t('copyFailed'));
  }
  $('copy').focus();
}

async function act(method, path, okMessage) {
  try {
    await call(method, path);
    state.notice = okMessage;
    announce(okMessage);
  } catch (e) {
    state.notice = plain(e);
  }
  state.segments = [];
  await refreshJob();
}

// --- live updates ---

// schedule polls again while anything shown is still moving; a page with
// only finished jobs asks nothing.
function schedule() {
  stopPolling();
  if (!state.session || !state.session.signed_in || document.hidden) return;
  let busy;
  if (state.jobId) {
    const d = state.details.get(state.jobId);
    busy = !d || !settled(d.state);
  } else {
    busy = state.uploading > 0 || state.jobs.some((j) => needsDetail(j.id));
  }
  if (busy) state.timer = setTimeout(() => (state.jobId ? refreshJob() : loadJobs()), POLL_MS);
}

function stopPolling() {
  clearTimeout(state.timer);
  state.timer = 0;
}

// --- formatting ---

function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? h + ':' + String(m).padStart(2, '0') + ':' + ss : m + ':' + ss;
}

function bytes(n) {
  const units = state.lang === 'ru' ? ['Б', 'КБ', 'МБ', 'ГБ'] : ['B', 'KB', 'MB', 'GB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + ' ' + units[i];
}

function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? '' : d.toLocaleString(state.lang, { dateStyle: 'short', timeStyle: 'short' });
}

function baseName(name) {
  const i = name.lastIndexOf('.');
  return i > 0 ? name.slice(0, i) : name;
}

// --- wiring ---

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  $('ui-lang').addEventListener('change', (e) => {
    localStorage.setItem(LANG_KEY, e.target.value);
    applyLanguage(e.target.value);
  });
  $('file').addEventListener('change', async (e) => {
    const files = Array.from(e.target.files);
    e.target.value = '';
    // Files chosen right after typing a token, before signing in, are
    // sent once the token has signed in.
    if (!(state.session && state.session.signed_in) && !(await signInWith($('token').value.trim()))) return;
    uploadFiles(files);
  });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    uploadFiles(e.dataTransfer.files);
  });
  $('newer').addEventListener('click', () => { state.page = Math.max(0, state.page - 1); loadJobs(); });
  $('older').addEventListener('click', () => {
    state.pageTokens[state.page + 1] = state.nextToken;
    state.page++;
    loadJobs();
  });
  $('segments').addEventListener('click', playFrom);
  $('player').addEventListener('timeupdate', highlight);
  $('player').addEventListener('seeked', highlight);
  $('copy').addEventListener('click', copyText);
  $('revive').addEventListener('click', () => act('POST', jobURL(state.jobId, '/revive'), t('reviving')));
  $('cancel').addEventListener('click', () => act('DELETE', jobURL(state.jobId), t('cancelling')));
  window.addEventListener('hashchange', route);
  // A hidden tab stops polling; coming back catches up at once.
  document.addEventListener('visibilitychange', () => {
    if (document.hidden || !state.session || !state.session.signed_in) return;
    if (state.jobId) refreshJob(); else loadJobs();
  });
  // A file dropped beside the drop zone would replace the page with it.
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => e.preventDefault());
  applyLanguage(pickLanguage());
  loadSession();
});
