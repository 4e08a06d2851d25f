import { describe, expect, it } from 'vitest';
import {
  classifySolverCode,
  overCapCode,
  pollRequestsFor,
  RES_PHP_IDS_PER_REQUEST,
  redactKey,
  solverErrorFor,
  SolverAccountError,
  SolverOverCapError,
  SolverTaskError,
  SolverTransientError,
} from '../../functions/core/solver-protocol.js';

describe('solver error table', () => {
  it.each([
    ['CAPCHA_NOT_READY', 'not_ready'],
    ['ERROR_NO_SLOT_AVAILABLE', 'over_cap'],
    ['ERROR_SERVER_ERROR', 'transient'],
    ['ERROR_CAPTCHA_UNSOLVABLE', 'task_terminal'],
    ['ERROR_WRONG_CAPTCHA_ID', 'task_terminal'],
    // The JSON task APIs' own (were unknown: polled to the transient budget, then handed back).
    ['WRONG_CAPTCHA_ID', 'task_terminal'],
    ['ERROR_CAPTCHA_SOLVEFAILED', 'task_terminal'],
    ['ERROR_PROXY_HAS_NO_IMAGE_SUPPORT', 'task_terminal'],
    ['ERROR_FAILED_LOADING_WIDGET', 'task_terminal'],
    ['ERROR_VISIBLE_RECAPTCHA', 'task_terminal'],
    ['ERROR_ALL_WORKERS_FILTERED', 'task_terminal'],
    ['ERROR_KEY_DOES_NOT_EXIST', 'account'],
    ['IP_BANNED', 'account'],
    ['SOMETHING_NEW', 'transient'],
  ])('%s is %s in both dialects', (code, errorClass) => {
    expect(classifySolverCode(code, 'captchaai')).toBe(errorClass);
    expect(classifySolverCode(code, '2captcha')).toBe(errorClass);
  });

  it('reads ERROR_ZERO_BALANCE per dialect: no free threads at CaptchaAI, no money at 2captcha', () => {
    expect(classifySolverCode('ERROR_ZERO_BALANCE', 'captchaai')).toBe('over_cap');
    expect(classifySolverCode('ERROR_ZERO_BALANCE', '2captcha')).toBe('account');
    expect(overCapCode('captchaai')).toBe('ERROR_ZERO_BALANCE');
    expect(overCapCode('2captcha')).toBe('ERROR_NO_SLOT_AVAILABLE');
  });

  it('builds the typed error of each class with the task id', () => {
    expect(solverErrorFor('ERROR_NO_SLOT_AVAILABLE', '2captcha', { taskId: 't1' })).toBeInstanceOf(SolverOverCapError);
    expect(solverErrorFor('ERROR_PAGEURL', '2captcha')).toBeInstanceOf(SolverTaskError);
    expect(solverErrorFor('ERROR_WRONG_USER_KEY', 'captchaai')).toBeInstanceOf(SolverAccountError);
    const transient = solverErrorFor('ERROR_SERVER_ERROR', 'captchaai', { taskId: 't2' });
    expect(transient).toBeInstanceOf(SolverTransientError);
    expect(transient).toMatchObject({
      name: 'SolverTransientError',
      code: 'ERROR_SERVER_ERROR',
      errorClass: 'transient',
      taskId: 't2',
    });
  });

  it('redacts a key from URLs and free text', () => {
    const key = '0123456789abcdef0123456789abcdef';
    const text = `GET https://ocr.example/res.php?key=${key}&action=get failed; body echoed ${key}`;
    const redacted = redactKey(text, key);
    expect(redacted).not.toContain(key);
    expect(redacted).toContain('key=***');
  });
});

describe('requests a poll of many submissions takes', () => {
  it('one bulk res.php request per 100 ids; one getTaskResult per id on the JSON task API', () => {
    expect(RES_PHP_IDS_PER_REQUEST).toBe(100);
    expect(pollRequestsFor('res-php', 0)).toBe(0);
    expect(pollRequestsFor('res-php', 1)).toBe(1);
    expect(pollRequestsFor('res-php', 100)).toBe(1);
    expect(pollRequestsFor('res-php', 101)).toBe(2);
    expect(pollRequestsFor('res-php', 1000)).toBe(10);
    expect(pollRequestsFor('create-task', 0)).toBe(0);
    expect(pollRequestsFor('create-task', 7)).toBe(7);
  });
});
