import assert from 'node:assert/strict';
import { analyzeHtaccess, htaccessNote } from '../../../domain/panel/htaccess';

// What an imported site's .htaccess becomes (issue 34 part 3): php_value lines within the
// operator's bounds are carried from the document root's file; every other line is reported.

describe('panel: .htaccess of imported sites', () => {
  it('carries php_value sizes and numbers within bounds, in the table unit', () => {
    const a = analyzeHtaccess('php_value memory_limit 1G\nphp_value post_max_size 65536K\nphp_admin_value max_execution_time 120\nphp_value max_input_vars "5000"\n', true);
    assert.deepEqual(a.php, { memory_limit: 1024, post_max_size: 64, max_execution_time: 120, max_input_vars: 5000 }, 'G and K become MB; seconds and counts stay numbers');
    assert.deepEqual(a.ignored, [], 'nothing else to report');
    assert.match(htaccessNote(a), /^carried into the website's PHP values: memory_limit 1024 MB, post_max_size 64 MB/, 'the note names what was carried');
  });

  it('reports values outside the bounds, unknown names, flags and subfolder files instead of carrying them', () => {
    const a = analyzeHtaccess('php_value memory_limit 4096M\nphp_value memory_limit 1000\nphp_value session.save_path /tmp\nphp_flag engine off\nphp_value constructor 1\n', true);
    assert.deepEqual(a.php, {}, 'nothing carried');
    const php = a.ignored.find((i) => i.what === 'PHP settings');
    assert.deepEqual(
      php?.directives,
      ["php_value memory_limit: 4096M is outside the operator's bounds (16 to 1024 MB)", 'php_value memory_limit: 1000 is outside the operator\'s bounds (16 to 1024 MB)', 'php_value session.save_path', 'php_flag engine', 'php_value constructor'],
      'each refused line with its reason',
    );
    const sub = analyzeHtaccess('php_value memory_limit 256M\n', false);
    assert.deepEqual(sub.php, {}, "a subfolder's value is not the site's");
    assert.match(sub.ignored[0].directives[0], /in a subfolder \(Apache applies it to that folder only\)/, 'the reason says why');
  });

  it('groups the directives nginx ignores by consequence, with counts, through wrappers and continuation lines', () => {
    const text = [
      '# comment',
      '<IfModule mod_rewrite.c>',
      'RewriteEngine On',
      'RewriteCond %{HTTPS} off \\',
      '  [OR]',
      'RewriteRule (.*) https://%{HTTP_HOST}/$1 [R=301,L]',
      'RewriteRule ^old$ /new [L]',
      '</IfModule>',
      'Order deny,allow',
      'Deny from all',
      'AuthType Basic',
      'AuthUserFile /home/a/.htpasswd',
      'Require valid-user',
      'ErrorDocument 404 /404.html',
      'Options -Indexes',
      'Header set X-Frame-Options DENY',
      '<Limit GET POST>',
      '</Limit>',
      '',
    ].join('\r\n');
    const a = analyzeHtaccess(text, true);
    const by = Object.fromEntries(a.ignored.map((i) => [i.what, i.directives]));
    assert.deepEqual(by['rewrite rules'], ['RewriteEngine', 'RewriteCond', 'RewriteRule ×2'], 'rewrites counted; the continuation line is one directive');
    assert.deepEqual(by['access rules'], ['Order', 'Deny', 'Require', '<Limit>'], 'access rules, the Limit section included');
    assert.deepEqual(by['password protection'], ['AuthType', 'AuthUserFile'], 'password protection');
    assert.deepEqual(by['error pages'], ['ErrorDocument'], 'error pages');
    assert.deepEqual(by['headers and caching'], ['Header'], 'headers');
    assert.deepEqual(by['other directives'], ['Options'], 'everything else is still named');
    assert.match(htaccessNote(a), /password protection \(AuthType, AuthUserFile\) has no effect: the paths it protected are public/, 'the consequence is spelled out');
    assert.match(htaccessNote(analyzeHtaccess('# only a comment\n', true)), /^nothing but comments/, 'an empty file says so');
  });
});
