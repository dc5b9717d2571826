// landing.js: the pages the store platform's OAuth callback redirects to:
// /dashboard/connect-store/success?shop=... and /dashboard/connect-store/error?reason=...
import { h, mount } from './lib.js';

const reasons = {
  invalid_request: 'The store platform sent the browser back without the code, shop and state a connection needs.',
  invalid_shop: 'The shop domain the store platform sent back is not a valid store domain.',
  invalid_state: 'The sign-in state did not match a connection started from this dashboard (it may have expired). Start the connection again.',
  invalid_hmac: 'The store platform’s signature on the answer did not verify: check the app’s client secret.',
  token_exchange_failed: 'The store platform refused to exchange the approval code for an access token: check the app’s client id and secret.',
  webhook_registration_failed: 'The store was reached, but registering its order webhooks failed. Try again; check the app’s scopes (orders).',
  store_platform_error: 'The store platform did not answer as expected. Try again in a moment.',
  unavailable: 'The gateway could not save the connection just now. Try again in a moment.',
};

export function landing(root, ok, q, signedIn) {
  const shop = q.get('shop') || '';
  const reason = q.get('reason') || '';
  document.title = (ok ? 'Store connected' : 'Store not connected') + ' · gateway';
  mount(root, h('main', { class: 'signin landing' },
    h('h1', {}, 'gateway'),
    ok
      ? h('section', { class: 'card', id: 'connect-result' },
        h('h2', {}, 'Your store is connected'),
        h('p', {}, shop ? ['The gateway is now connected to ', h('strong', {}, shop), '. '] : 'The gateway is now connected to your store. ',
          'Its order events (placed, paid, shipped, cancelled, refunded) send your customers a message from your linked phone, using your templates.'))
      : h('section', { class: 'card', id: 'connect-result' },
        h('h2', {}, 'The store was not connected'),
        h('p', { class: 'notice error', role: 'alert' }, reasons[reason] || (reason ? 'The connection failed (' + reason + ').' : 'The connection failed.')),
        h('p', {}, 'Nothing was changed. You can start again from the Store page.')),
    h('p', {}, h('a', { class: 'button', href: '/dashboard/#/store' }, signedIn ? 'Back to the Store page' : 'Open the dashboard'))));
}
